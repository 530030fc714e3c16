// The kernels the test executor can run: CPU versions of the kernels in the CUDA test
// programs (tests/cuda/), found by their mangled names as the driver finds them; and the
// module variables (__device__, __constant__) those programs declare, found by name as
// cuModuleGetGlobal finds them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace vmcuda::testing {

// Device memory [ptr, ptr + bytes) as host bytes, or nullptr (an illegal address).
using DeviceMemory = std::function<std::byte*(uint64_t ptr, size_t bytes)>;
// The bytes of a variable of the launched kernel's module, by name, or nullptr when the
// module has none of that name (see fake_globals below).
using ModuleGlobal = std::function<std::byte*(const char* name)>;

// A texture object as the fake driver holds it (fake_driver.cc cuTexObjectCreate), for the
// kernels that fetch from it (tex_fetch). Element (x, y, z) lies at data + z * slice +
// y * pitch + x * element bytes; `depth` counts layers (layered) or slices (3D), 0 when none.
struct FakeTexture {
  const std::byte* data = nullptr;
  uint64_t pitch = 0, slice = 0;
  uint64_t width = 0, height = 0, depth = 0;
  int format = 0;  // CUarray_format
  unsigned channels = 1;
  int address[3] = {0, 0, 0};  // CUaddress_mode
  int filter = 0;              // CUfilter_mode
  bool read_as_integer = false;
  bool normalized = false;
  float border[4] = {0, 0, 0, 0};
};
// A surface object: its array's bytes.
struct FakeSurface {
  std::byte* data = nullptr;
  uint64_t pitch = 0, slice = 0;
  uint64_t width_bytes = 0, height = 0, depth = 0;
};
// A texture fetch as the hardware does it (CUDA C++ Programming Guide, "Texture Fetching"):
// normalized coordinates scaled by the size, the address mode applied to each texel index,
// point sampling T[floor(x)], linear filtering with 8-bit fractional weights; `layer`: the
// layer of a layered texture (else 0). Each channel as the read mode returns it: integer
// texels read as integers (element type) or as normalized floats; float and half as floats.
// `dims`: 1 or 2 (3D textures are not fetched by the test programs).
void tex_fetch(const FakeTexture& t, int dims, float x, float y, int layer, double out[4]);

// Conditional handles of graphs (fake_driver.cc cuGraphConditionalHandleCreate): their values,
// which kernels set (cudaGraphSetConditional) and conditional nodes read. Thread-safe.
uint64_t fake_conditional_create(unsigned default_value, unsigned flags);
bool fake_conditional_known(uint64_t handle);
unsigned fake_conditional_value(uint64_t handle);
void fake_set_conditional(uint64_t handle, unsigned value);
// At each graph launch: the handles made with cudaGraphCondAssignDefault take their default.
void fake_conditionals_to_default();

// What a kernel is launched with, besides its parameters.
struct FakeLaunch {
  uint64_t threads;       // grid * block, all dimensions
  unsigned grid[3];
  unsigned block[3];
  uint32_t shared_bytes;  // dynamic shared memory
  DeviceMemory mem;
  ModuleGlobal global;
  // The context's printf FIFO (device_printf below; the fake driver writes it to stdout at
  // the next synchronizing call, as the driver does) and its size (cudaLimitPrintfFifoSize).
  std::string* printf_fifo = nullptr;
  size_t printf_fifo_bytes = 0;
  // Launched cooperatively (every block co-resident): grid-wide barriers work. A kernel that
  // needs one fails otherwise (its grid workspace is missing: an illegal address).
  bool cooperative = false;
  // The context's texture and surface objects by value; false for one it does not have.
  std::function<bool(uint64_t, FakeTexture*)> texture = {};
  std::function<bool(uint64_t, FakeSurface*)> surface = {};
};

// A kernel's printf(): appended to the launch's FIFO; a line that does not fit is lost, as
// on the device. Returns false once the FIFO is full (loops stop early: the lines are lost anyway).
bool device_printf(const FakeLaunch& launch, const char* format, ...) __attribute__((format(printf, 2, 3)));

// What a kernel's run() returns for a kernel that never ends (tests/security/endless_kernel.cu's
// spin_forever with its flag 0): the launch succeeds, its stream stays busy (cuStreamQuery:
// not ready), and cuCtxSynchronize / cuStreamSynchronize of it block until its context is
// destroyed or the process ends, as on a GPU.
inline constexpr int kFakeNeverEnds = -1000;

struct FakeKernel {
  const char* name;
  std::vector<std::pair<uint32_t, uint32_t>> params;  // (offset, size), as cuFuncGetParamInfo
  // Runs the launch's worth of work; returns a CUresult (700 for an illegal address).
  int (*run)(void** params, const FakeLaunch& launch);
  // What cuFuncGetAttribute reports: registers per thread (ptxas -v for the test programs'
  // sm_90 code) and static shared, constant and local memory in bytes.
  int num_regs = 16;
  int shared_bytes = 0;
  int const_bytes = 0;
  int local_bytes = 0;
};

// The kernel named `name`, or nullptr.
const FakeKernel* find_fake_kernel(const char* name);
// Every kernel the executor knows.
std::span<const FakeKernel> all_fake_kernels();

// A module variable of the test programs: every module the executor loads has each of
// these (storage made on first use), with its initial bytes (zeros where `init` is
// shorter). A test image (kFakeModuleMagic) has them too.
struct FakeGlobal {
  const char* name;  // as registered (__cudaRegisterVar's deviceName)
  size_t bytes;
  std::vector<std::byte> init;
  bool managed = false;  // __managed__: managed memory (cuPointerGetAttribute IS_MANAGED)
};

// The variable named `name`, or nullptr (cuModuleGetGlobal: CUDA_ERROR_NOT_FOUND).
const FakeGlobal* find_fake_global(const char* name);
// Where `g` lies in a module's data (each variable at a fixed, 256-aligned offset).
uint64_t fake_global_offset(const FakeGlobal* g);

}  // namespace vmcuda::testing
