// api/include/vmcuda/api/cudnn_abi.h against NVIDIA's cudnn_graph.h (built where it is installed):
// the statuses, the attribute types with a meaning on the wire, each type's element size from the
// C type NVIDIA's documentation gives it, and the descriptor types' range.
#include <cudnn_graph.h>
#include <gtest/gtest.h>

#include "vmcuda/api/cudnn_abi.h"

namespace api = vmcuda::api;

static_assert(api::kCudnnSuccess == CUDNN_STATUS_SUCCESS);
static_assert(api::kCudnnNotInitialized == CUDNN_STATUS_NOT_INITIALIZED);
static_assert(api::kCudnnBadParam == CUDNN_STATUS_BAD_PARAM);
static_assert(api::kCudnnBadParamNullPointer == CUDNN_STATUS_BAD_PARAM_NULL_POINTER);
static_assert(api::kCudnnBadParamNotFinalized == CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED);
static_assert(api::kCudnnBadParamAttributeType == CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE);
static_assert(api::kCudnnBadParamDescriptorType == CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE);
static_assert(api::kCudnnNotSupported == CUDNN_STATUS_NOT_SUPPORTED);
static_assert(api::kCudnnInternalError == CUDNN_STATUS_INTERNAL_ERROR);
static_assert(api::kCudnnExecutionFailed == CUDNN_STATUS_EXECUTION_FAILED);
static_assert(api::kCudnnTypeHandle == CUDNN_TYPE_HANDLE && api::kCudnnTypeVoidPtr == CUDNN_TYPE_VOID_PTR &&
              api::kCudnnTypeBackendDescriptor == CUDNN_TYPE_BACKEND_DESCRIPTOR && api::kCudnnTypeChar == CUDNN_TYPE_CHAR);
static_assert(api::kCudnnVariantPackDescriptor == CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);

TEST(CudnnAbi, ElementSizesAreThoseOfEachTypesCType) {
  struct Row {
    cudnnBackendAttributeType_t type;
    size_t bytes;
  };
  const Row rows[] = {
      {CUDNN_TYPE_HANDLE, sizeof(cudnnHandle_t)},
      {CUDNN_TYPE_DATA_TYPE, sizeof(cudnnDataType_t)},
      {CUDNN_TYPE_BOOLEAN, sizeof(bool)},
      {CUDNN_TYPE_INT64, sizeof(int64_t)},
      {CUDNN_TYPE_FLOAT, sizeof(float)},
      {CUDNN_TYPE_DOUBLE, sizeof(double)},
      {CUDNN_TYPE_VOID_PTR, sizeof(void*)},
      {CUDNN_TYPE_CONVOLUTION_MODE, sizeof(cudnnConvolutionMode_t)},
      {CUDNN_TYPE_HEUR_MODE, sizeof(cudnnBackendHeurMode_t)},
      {CUDNN_TYPE_KNOB_TYPE, sizeof(cudnnBackendKnobType_t)},
      {CUDNN_TYPE_NUMERICAL_NOTE, sizeof(cudnnBackendNumericalNote_t)},
      {CUDNN_TYPE_LAYOUT_TYPE, sizeof(cudnnBackendLayoutType_t)},
      {CUDNN_TYPE_ATTRIB_NAME, sizeof(cudnnBackendAttributeName_t)},
      {CUDNN_TYPE_POINTWISE_MODE, sizeof(cudnnPointwiseMode_t)},
      {CUDNN_TYPE_BACKEND_DESCRIPTOR, sizeof(cudnnBackendDescriptor_t)},
      {CUDNN_TYPE_GENSTATS_MODE, sizeof(cudnnGenStatsMode_t)},
      {CUDNN_TYPE_BN_FINALIZE_STATS_MODE, sizeof(cudnnBnFinalizeStatsMode_t)},
      {CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, sizeof(cudnnReduceTensorOp_t)},
      {CUDNN_TYPE_BEHAVIOR_NOTE, sizeof(cudnnBackendBehaviorNote_t)},
      {CUDNN_TYPE_TENSOR_REORDERING_MODE, sizeof(cudnnBackendTensorReordering_t)},
      {CUDNN_TYPE_RESAMPLE_MODE, sizeof(cudnnResampleMode_t)},
      {CUDNN_TYPE_PADDING_MODE, sizeof(cudnnPaddingMode_t)},
      {CUDNN_TYPE_INT32, sizeof(int32_t)},
      {CUDNN_TYPE_CHAR, sizeof(char)},
      {CUDNN_TYPE_SIGNAL_MODE, sizeof(cudnnSignalMode_t)},
      {CUDNN_TYPE_FRACTION, sizeof(cudnnFraction_t)},
      {CUDNN_TYPE_NORM_MODE, sizeof(cudnnBackendNormMode_t)},
      {CUDNN_TYPE_NORM_FWD_PHASE, sizeof(cudnnBackendNormFwdPhase_t)},
      {CUDNN_TYPE_RNG_DISTRIBUTION, sizeof(cudnnRngDistribution_t)},
  };
  for (const Row& r : rows) EXPECT_EQ(api::cudnn_element_bytes(r.type), r.bytes) << "type " << r.type;
  EXPECT_EQ(api::cudnn_element_bytes(-1), 0u);
  EXPECT_EQ(api::cudnn_element_bytes(1000), 0u);
}

TEST(CudnnAbi, DescriptorTypesEndWhereTheHeadersDo) {
  EXPECT_EQ(api::kCudnnDescriptorTypes, int(CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR) + 1);
}
