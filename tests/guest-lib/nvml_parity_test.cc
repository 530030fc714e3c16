// guest-lib's transcription of the NVML types (include/vmcuda/nvml_types.h) against NVIDIA's
// nvml.h, where one is installed (the CUDA toolkit's, or NVML_INCLUDE_DIR): every value and
// layout libnvidia-ml.so.1 hands out. Compile-time checks; the test body only reports them.
#include <gtest/gtest.h>
#include <nvml.h>

#include <cstddef>

// nvml.h's constants, taken before vmcuda's header redefines the same macros.
namespace nvidia {
constexpr unsigned kPciBusId = NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE, kPciBusIdV2 = NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE,
                   kUuid = NVML_DEVICE_UUID_BUFFER_SIZE, kUuidV2 = NVML_DEVICE_UUID_V2_BUFFER_SIZE,
                   kDriver = NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE, kNvml = NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE,
                   kName = NVML_DEVICE_NAME_BUFFER_SIZE, kNameV2 = NVML_DEVICE_NAME_V2_BUFFER_SIZE,
                   kApi = NVML_API_VERSION, kNoGpus = NVML_INIT_FLAG_NO_GPUS, kMemoryV2 = nvmlMemory_v2,
                   kHopper = NVML_DEVICE_ARCH_HOPPER, kBlackwell = NVML_DEVICE_ARCH_BLACKWELL,
                   kAmpere = NVML_DEVICE_ARCH_AMPERE, kAda = NVML_DEVICE_ARCH_ADA, kUnknown = NVML_DEVICE_ARCH_UNKNOWN;
}  // namespace nvidia
#undef NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE
#undef NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE
#undef NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT
#undef NVML_DEVICE_PCI_BUS_ID_FMT
#undef NVML_DEVICE_UUID_BUFFER_SIZE
#undef NVML_DEVICE_UUID_V2_BUFFER_SIZE
#undef NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE
#undef NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE
#undef NVML_DEVICE_NAME_BUFFER_SIZE
#undef NVML_DEVICE_NAME_V2_BUFFER_SIZE
#undef NVML_API_VERSION
#undef NVML_INIT_FLAG_NO_GPUS
#undef NVML_INIT_FLAG_NO_ATTACH
#undef NVML_INIT_FLAG_FORCE_INIT
#undef NVML_STRUCT_VERSION
#undef nvmlMemory_v2
#undef NVML_DEVICE_ARCH_KEPLER
#undef NVML_DEVICE_ARCH_MAXWELL
#undef NVML_DEVICE_ARCH_PASCAL
#undef NVML_DEVICE_ARCH_VOLTA
#undef NVML_DEVICE_ARCH_TURING
#undef NVML_DEVICE_ARCH_AMPERE
#undef NVML_DEVICE_ARCH_ADA
#undef NVML_DEVICE_ARCH_HOPPER
#undef NVML_DEVICE_ARCH_BLACKWELL
#undef NVML_DEVICE_ARCH_UNKNOWN

namespace ours {
#include "vmcuda/nvml_types.h"
}  // namespace ours

#define SAME_VALUE(name) static_assert(static_cast<long>(ours::name) == static_cast<long>(::name), #name)
SAME_VALUE(NVML_SUCCESS);
SAME_VALUE(NVML_ERROR_UNINITIALIZED);
SAME_VALUE(NVML_ERROR_INVALID_ARGUMENT);
SAME_VALUE(NVML_ERROR_NOT_SUPPORTED);
SAME_VALUE(NVML_ERROR_NO_PERMISSION);
SAME_VALUE(NVML_ERROR_ALREADY_INITIALIZED);
SAME_VALUE(NVML_ERROR_NOT_FOUND);
SAME_VALUE(NVML_ERROR_INSUFFICIENT_SIZE);
SAME_VALUE(NVML_ERROR_DRIVER_NOT_LOADED);
SAME_VALUE(NVML_ERROR_GPU_IS_LOST);
SAME_VALUE(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
SAME_VALUE(NVML_ERROR_GPU_NOT_FOUND);
SAME_VALUE(NVML_ERROR_RESET_TYPE_NOT_SUPPORTED);
SAME_VALUE(NVML_ERROR_UNKNOWN);
SAME_VALUE(NVML_FEATURE_DISABLED);
SAME_VALUE(NVML_FEATURE_ENABLED);
SAME_VALUE(NVML_COMPUTEMODE_DEFAULT);
SAME_VALUE(NVML_COMPUTEMODE_EXCLUSIVE_PROCESS);
SAME_VALUE(NVML_BRAND_TESLA);
SAME_VALUE(NVML_BRAND_GEFORCE);
SAME_VALUE(NVML_BRAND_NVIDIA_RTX);
SAME_VALUE(NVML_BRAND_NVIDIA);

static_assert(NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE == nvidia::kPciBusId);
static_assert(NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE == nvidia::kPciBusIdV2);
static_assert(NVML_DEVICE_UUID_BUFFER_SIZE == nvidia::kUuid && NVML_DEVICE_UUID_V2_BUFFER_SIZE == nvidia::kUuidV2);
static_assert(NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE == nvidia::kDriver && NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE == nvidia::kNvml);
static_assert(NVML_DEVICE_NAME_BUFFER_SIZE == nvidia::kName && NVML_DEVICE_NAME_V2_BUFFER_SIZE == nvidia::kNameV2);
static_assert(NVML_API_VERSION == nvidia::kApi && NVML_INIT_FLAG_NO_GPUS == nvidia::kNoGpus);
static_assert(NVML_DEVICE_ARCH_HOPPER == nvidia::kHopper && NVML_DEVICE_ARCH_BLACKWELL == nvidia::kBlackwell &&
              NVML_DEVICE_ARCH_AMPERE == nvidia::kAmpere && NVML_DEVICE_ARCH_ADA == nvidia::kAda &&
              NVML_DEVICE_ARCH_UNKNOWN == nvidia::kUnknown);

// Layouts: size and every field's offset.
#define SAME_FIELD(type, field) static_assert(offsetof(ours::type, field) == offsetof(::type, field), #type "." #field)
static_assert(sizeof(ours::nvmlPciInfo_t) == sizeof(::nvmlPciInfo_t));
SAME_FIELD(nvmlPciInfo_t, busIdLegacy);
SAME_FIELD(nvmlPciInfo_t, domain);
SAME_FIELD(nvmlPciInfo_t, bus);
SAME_FIELD(nvmlPciInfo_t, device);
SAME_FIELD(nvmlPciInfo_t, pciDeviceId);
SAME_FIELD(nvmlPciInfo_t, pciSubSystemId);
SAME_FIELD(nvmlPciInfo_t, busId);
static_assert(sizeof(ours::nvmlMemory_t) == sizeof(::nvmlMemory_t));
SAME_FIELD(nvmlMemory_t, total);
SAME_FIELD(nvmlMemory_t, free);
SAME_FIELD(nvmlMemory_t, used);
static_assert(sizeof(ours::nvmlMemory_v2_t) == sizeof(::nvmlMemory_v2_t));
SAME_FIELD(nvmlMemory_v2_t, version);
SAME_FIELD(nvmlMemory_v2_t, total);
SAME_FIELD(nvmlMemory_v2_t, reserved);
SAME_FIELD(nvmlMemory_v2_t, free);
SAME_FIELD(nvmlMemory_v2_t, used);
static_assert(sizeof(ours::nvmlUtilization_t) == sizeof(::nvmlUtilization_t));
SAME_FIELD(nvmlUtilization_t, gpu);
SAME_FIELD(nvmlUtilization_t, memory);

TEST(NvmlParity, TypesMatchNvidiasHeader) {
  // The struct version nvmlMemory_v2 of ours (its macro, in namespace ours' sizes) is NVIDIA's.
  EXPECT_EQ((unsigned)(sizeof(ours::nvmlMemory_v2_t) | (2 << 24U)), nvidia::kMemoryV2);
}
