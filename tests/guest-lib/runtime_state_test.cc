// guest-lib's error state (guest-lib/src/runtime_state.h), linked alone: per-thread last
// error and the process-wide sticky error, as measured on the H200
// (docs/cuda-runtime-internals.md §7).
#include "runtime_state.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace {

using namespace vmcuda::guest;

class RuntimeState : public ::testing::Test {
 protected:
  void SetUp() override {
    reset_sticky_error_for_testing();
    take_last_error();
  }
  void TearDown() override { reset_sticky_error_for_testing(); }
};

TEST_F(RuntimeState, FailureBecomesTheLastErrorUntilTaken) {
  EXPECT_EQ(peek_last_error(), cudaSuccess);
  EXPECT_EQ(record(cudaErrorInvalidValue), cudaErrorInvalidValue);
  // A later success does not clear it.
  EXPECT_EQ(record(cudaSuccess), cudaSuccess);
  EXPECT_EQ(peek_last_error(), cudaErrorInvalidValue);
  EXPECT_EQ(peek_last_error(), cudaErrorInvalidValue);
  EXPECT_EQ(take_last_error(), cudaErrorInvalidValue);
  EXPECT_EQ(take_last_error(), cudaSuccess);
  // The latest failure wins.
  record(cudaErrorInvalidValue);
  record(cudaErrorMemoryAllocation);
  EXPECT_EQ(take_last_error(), cudaErrorMemoryAllocation);
}

TEST_F(RuntimeState, LastErrorIsPerThread) {
  record(cudaErrorInvalidValue);
  cudaError_t other_before = cudaErrorUnknown, other_after = cudaErrorUnknown;
  std::thread t([&] {
    other_before = peek_last_error();
    record(cudaErrorMemoryAllocation);
    other_after = take_last_error();
  });
  t.join();
  EXPECT_EQ(other_before, cudaSuccess);
  EXPECT_EQ(other_after, cudaErrorMemoryAllocation);
  EXPECT_EQ(take_last_error(), cudaErrorInvalidValue);
}

TEST_F(RuntimeState, NonStickyErrorsDoNotStick) {
  record(cudaErrorLaunchOutOfResources);
  record(cudaErrorInvalidConfiguration);
  EXPECT_EQ(sticky_error(), cudaSuccess);
  EXPECT_EQ(enter_device_call(), cudaSuccess);
}

TEST_F(RuntimeState, StickyErrorIsReturnedByEveryLaterDeviceCall) {
  // The H200 sequence after an illegal address: sync=700 get=700 get=0, then
  // malloc=700 sync=700 peek=700.
  EXPECT_EQ(record(cudaErrorIllegalAddress), cudaErrorIllegalAddress);
  EXPECT_EQ(take_last_error(), cudaErrorIllegalAddress);
  EXPECT_EQ(take_last_error(), cudaSuccess);
  EXPECT_EQ(enter_device_call(), cudaErrorIllegalAddress);
  EXPECT_EQ(enter_device_call(), cudaErrorIllegalAddress);
  EXPECT_EQ(peek_last_error(), cudaErrorIllegalAddress);
  // In every thread.
  cudaError_t other = cudaSuccess;
  std::thread t([&] { other = enter_device_call(); });
  t.join();
  EXPECT_EQ(other, cudaErrorIllegalAddress);
  // The first sticky error stays.
  record(cudaErrorLaunchFailure);
  EXPECT_EQ(sticky_error(), cudaErrorIllegalAddress);
}

TEST_F(RuntimeState, StickyCodes) {
  for (cudaError_t e : {cudaErrorContained, cudaErrorIllegalAddress, cudaErrorLaunchTimeout, cudaErrorAssert,
                        cudaErrorHardwareStackError, cudaErrorIllegalInstruction, cudaErrorMisalignedAddress,
                        cudaErrorInvalidAddressSpace, cudaErrorInvalidPc, cudaErrorLaunchFailure,
                        cudaErrorTensorMemoryLeak, cudaErrorMpsClientTerminated, cudaErrorExternalDevice})
    EXPECT_TRUE(is_sticky(e)) << e;
  for (cudaError_t e : {cudaSuccess, cudaErrorInvalidValue, cudaErrorMemoryAllocation, cudaErrorNotSupported,
                        cudaErrorInvalidDeviceFunction, cudaErrorCooperativeLaunchTooLarge, cudaErrorUnknown})
    EXPECT_FALSE(is_sticky(e)) << e;
}

TEST_F(RuntimeState, UnsupportedCallReturns801OrTheStickyError) {
  std::atomic<bool> logged{false};
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(unsupported_call("cudaFoo", logged), cudaErrorNotSupported);
  EXPECT_EQ(unsupported_call("cudaFoo", logged), cudaErrorNotSupported);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(logged.load());
  EXPECT_EQ(take_last_error(), cudaErrorNotSupported);
  if (std::getenv("VMCUDA_LOG") == nullptr || std::atoi(std::getenv("VMCUDA_LOG")) >= 1) {
    EXPECT_EQ(err, "vmcuda: cudaFoo is not supported yet; it returns cudaErrorNotSupported (801)\n");
  }

  record(cudaErrorAssert);
  EXPECT_EQ(unsupported_call("cudaFoo", logged), cudaErrorAssert);
  EXPECT_EQ(peek_last_error(), cudaErrorAssert);
}

}  // namespace
