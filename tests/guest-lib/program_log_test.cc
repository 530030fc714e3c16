// The program's error log (guest-lib/src/program_log.h): CUDA's documented semantics of
// cudaLogsCurrent / DumpToMemory / DumpToFile / RegisterCallback, and the messages vmcuda puts
// there (its warnings, each call it does not support).
#include "program_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "log.h"
#include "runtime_state.h"

namespace {

namespace program_log = vmcuda::guest::program_log;

std::string dump(unsigned* it, size_t capacity, cudaError_t* status = nullptr) {
  std::vector<char> buf(capacity + 1, 'x');
  size_t size = capacity;
  const cudaError_t e = program_log::dump_to_memory(it, buf.data(), &size, 0);
  if (status) *status = e;
  if (e != cudaSuccess) return "<" + std::to_string(e) + ">";
  EXPECT_EQ(buf[size], '\0');
  return std::string(buf.data(), size);
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

class ProgramLog : public ::testing::Test {
 protected:
  void SetUp() override { program_log::reset_for_testing(); }
};

TEST_F(ProgramLog, MessagesCarryTheDocumentedFieldsAndTheIteratorAdvances) {
  unsigned it = 99;
  ASSERT_EQ(program_log::current(&it, 0), cudaSuccess);
  EXPECT_EQ(it, 0u);
  EXPECT_EQ(program_log::current(&it, 1), cudaSuccess);  // reserved flags, taken as NVIDIA's runtime takes them
  EXPECT_EQ(it, 0u);
  EXPECT_EQ(program_log::current(nullptr, 0), cudaErrorInvalidValue);
  program_log::add(program_log::kError, "vmcuda", "cudaFoo", "first");
  program_log::add(program_log::kWarning, "vmcuda", nullptr, "second");
  const std::string all = dump(&it, 4096);
  // "[HH:MM:SS.mmm][TID][vmcuda][E][cudaFoo] first\n[...][vmcuda][W] second\n"
  EXPECT_NE(all.find("][vmcuda][E][cudaFoo] first\n"), std::string::npos) << all;
  EXPECT_NE(all.find("][vmcuda][W] second\n"), std::string::npos) << all;
  EXPECT_EQ(all.front(), '[');
  EXPECT_EQ(count(all, "\n"), 2u);
  EXPECT_EQ(it, 2u);
  // Nothing new: size 0, success.
  EXPECT_EQ(dump(&it, 4096), "");
  program_log::add(program_log::kError, "vmcuda", nullptr, "third");
  const std::string next = dump(&it, 4096);
  EXPECT_EQ(count(next, "\n"), 1u);
  EXPECT_NE(next.find("third"), std::string::npos);
  // A null iterator dumps everything kept.
  EXPECT_EQ(count(dump(nullptr, 4096), "\n"), 3u);
}

TEST_F(ProgramLog, ASmallBufferGetsTheNewestAfterALineSayingSo) {
  for (int i = 0; i < 10; ++i) program_log::add(program_log::kError, "vmcuda", nullptr, ("message " + std::to_string(i)).c_str());
  unsigned it = 0;
  const std::string full = dump(nullptr, 4096);
  const size_t one = full.size() / 10;  // each line about the same length
  const std::string part = dump(&it, 3 * one + 100);
  EXPECT_NE(part.find("the buffer holds the newest"), std::string::npos) << part;
  EXPECT_NE(part.find("message 9\n"), std::string::npos) << part;
  EXPECT_EQ(part.find("message 0\n"), std::string::npos) << part;
  EXPECT_EQ(part.back(), '\n');
  EXPECT_EQ(it, 10u);
  // Too small for any message: size 0, invalid value, the iterator unchanged; and that
  // failure is itself logged.
  program_log::add(program_log::kError, "vmcuda", nullptr, "a long message that cannot fit");
  std::vector<char> tiny(8);
  size_t size = tiny.size();
  EXPECT_EQ(program_log::dump_to_memory(&it, tiny.data(), &size, 0), cudaErrorInvalidValue);
  EXPECT_EQ(size, 0u);
  EXPECT_EQ(it, 10u);
  EXPECT_NE(dump(&it, 4096).find("cannot hold the newest message"), std::string::npos);
}

TEST_F(ProgramLog, ArgumentErrorsAreRefusedAndLogged) {
  size_t size = 10;
  char b[10];
  unsigned it = 0;
  EXPECT_EQ(program_log::dump_to_memory(&it, nullptr, &size, 0), cudaErrorInvalidValue);
  EXPECT_EQ(program_log::dump_to_memory(&it, b, nullptr, 0), cudaErrorInvalidValue);
  EXPECT_EQ(program_log::dump_to_memory(&it, b, &size, 2), cudaErrorInvalidValue);
  EXPECT_EQ(program_log::dump_to_file(&it, nullptr, 0), cudaErrorInvalidValue);
  EXPECT_EQ(program_log::dump_to_file(&it, "/nonexistent-dir/log", 0), cudaErrorInvalidValue);
  const std::string all = dump(nullptr, 4096);
  EXPECT_NE(all.find("[cudaLogsDumpToMemory] buffer cannot be NULL"), std::string::npos) << all;
  EXPECT_NE(all.find("[cudaLogsDumpToMemory] size cannot be NULL"), std::string::npos) << all;
  EXPECT_NE(all.find("[cudaLogsDumpToFile] pathToFile cannot be NULL"), std::string::npos) << all;
  EXPECT_NE(all.find("cannot open /nonexistent-dir/log"), std::string::npos) << all;
}

TEST_F(ProgramLog, KeepsAtMostTheDocumentedBytesAndSaysWhatWasOverwritten) {
  const std::string text(200, 'a');
  for (int i = 0; i < 400; ++i) program_log::add(program_log::kWarning, "vmcuda", nullptr, text.c_str());
  const std::string all = dump(nullptr, 1 << 20);
  EXPECT_LE(all.size(), program_log::kCapacityBytes);
  EXPECT_GT(all.size(), program_log::kCapacityBytes - 400);
  unsigned it = 0;  // the first message: long overwritten
  const std::string from_start = dump(&it, 1 << 20);
  EXPECT_NE(from_start.find("earlier messages were overwritten"), std::string::npos);
  EXPECT_EQ(it, 400u);
}

TEST_F(ProgramLog, DumpToFileAppendsFromTheIterator) {
  char path[] = "/tmp/program_log_testXXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  program_log::add(program_log::kError, "vmcuda", nullptr, "one");
  unsigned it = 0;
  ASSERT_EQ(program_log::dump_to_file(&it, path, 0), cudaSuccess);
  EXPECT_EQ(it, 1u);
  program_log::add(program_log::kError, "vmcuda", nullptr, "two");
  ASSERT_EQ(program_log::dump_to_file(&it, path, 0), cudaSuccess);
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  EXPECT_EQ(count(s.str(), "\n"), 2u);
  EXPECT_NE(s.str().find("one"), std::string::npos);
  EXPECT_NE(s.str().find("two"), std::string::npos);
  unlink(path);
}

struct Seen {
  std::mutex mu;
  std::vector<std::pair<int, std::string>> got;
};
void on_message(void* data, cudaLogLevel level, char* message, size_t length) {
  auto* seen = static_cast<Seen*>(data);
  std::lock_guard g(seen->mu);
  seen->got.emplace_back(level, std::string(message, length));
}
bool wait_for(Seen& seen, size_t n) {
  for (int i = 0; i < 500; ++i) {
    {
      std::lock_guard g(seen.mu);
      if (seen.got.size() >= n) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

TEST_F(ProgramLog, CallbacksReceiveEachNewMessageUntilUnregistered) {
  Seen seen;
  void* handle = nullptr;
  EXPECT_EQ(program_log::register_callback(nullptr, &seen, &handle), cudaErrorInvalidValue);
  ASSERT_EQ(program_log::register_callback(on_message, &seen, &handle), cudaSuccess);
  ASSERT_NE(handle, nullptr);
  ASSERT_EQ(program_log::register_callback(on_message, &seen, nullptr), cudaSuccess);  // the handle is optional
  program_log::add(program_log::kWarning, "vmcuda", nullptr, "to both");
  ASSERT_TRUE(wait_for(seen, 2));
  {
    std::lock_guard g(seen.mu);
    EXPECT_EQ(seen.got[0].first, cudaLogLevelWarning);
    EXPECT_NE(seen.got[0].second.find("to both"), std::string::npos);
    EXPECT_EQ(seen.got[0].second.find('\n'), std::string::npos);  // a message, no newline
  }
  EXPECT_EQ(program_log::unregister_callback(handle), cudaSuccess);
  EXPECT_EQ(program_log::unregister_callback(handle), cudaErrorInvalidValue);
  EXPECT_EQ(program_log::unregister_callback(nullptr), cudaErrorInvalidValue);
}

// vmcuda's warnings reach the log whatever the console's level; so does each call it does
// not support (the console says that once).
TEST_F(ProgramLog, VmcudaWarningsAndUnsupportedCallsAreLogged) {
  VMCUDA_LOG(kWarn, "test", "the heap is full: %d", 7);
  static std::atomic<bool> logged{false};
  (void)vmcuda::guest::unsupported_call("cudaSomethingNew", logged);
  (void)vmcuda::guest::unsupported_call("cudaSomethingNew", logged);
  const std::string all = dump(nullptr, 4096);
  EXPECT_NE(all.find("][vmcuda][W] the heap is full: 7\n"), std::string::npos) << all;
  EXPECT_EQ(count(all, "[E][cudaSomethingNew] is not supported yet"), 2u) << all;
  (void)vmcuda::guest::take_last_error();
}

}  // namespace
