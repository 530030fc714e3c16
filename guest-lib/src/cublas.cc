// cuBLAS's hand-written part in libcuda.so.1 (cublas.h): handles and their settings (remoted:
// api/libs/cublas.calls marks them `hand`), what the guest answers itself (getters, versions,
// status strings) and the vector/matrix copies, which are the runtime's 2D copies. The rest
// is generated (scripts/gen-cublas.py).
#include "cublas.h"

#include <cstdio>
#include <memory>
#include <mutex>
#include <unordered_set>

#include "entry.h"
#include "log.h"
#include "runtime_state.h"
#include "stream_event.h"
#include "vmcuda/cudart_api.h"

namespace vmcuda::guest::cublas {
namespace {

struct Registry {
  std::mutex mu;
  std::unordered_set<Handle*> live;
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: calls may come from atexit handlers
  return *r;
}

bool is_status(int32_t s) {
  switch (s) {
    case kSuccess: case kNotInitialized: case kAllocFailed: case kInvalidValue: case 8: case kMappingError:
    case kExecutionFailed: case kInternalError: case kNotSupported: case 16:
      return true;
  }
  return false;
}

}  // namespace

int enter(cublasHandle_t app, Handle** h) noexcept {
  auto* p = reinterpret_cast<Handle*>(app);
  std::lock_guard l(registry().mu);
  if (!p || !registry().live.count(p)) return kNotInitialized;
  *h = p;
  return kSuccess;
}

int scalar(const Handle& h, const void* value, size_t bytes, uint8_t (&field)[16]) noexcept {
  if (!value) return kInvalidValue;
  if (bytes == 0 || bytes > sizeof field) return kNotSupported;
  if (h.pointer_mode == kPointerModeHost) {
    std::memcpy(field, value, bytes);
  } else {
    const uint64_t p = device_pointer(value);
    std::memcpy(field, &p, sizeof p);
  }
  return kSuccess;
}

int illegal_value(const char* routine, int parameter) noexcept {
  std::printf(" ** On entry to %s  parameter number %d had an illegal value\n", routine, parameter);
  std::fflush(stdout);
  return kInvalidValue;
}

int status_of(int32_t s, const char* call) noexcept {
  if (s == 0) return kSuccess;
  if (s < 0) {
    VMCUDA_LOG(kWarn, "cublas", "%s: the host refused the call (channel status %d): vmcuda's guest library and "
               "vmcuda-stub do not match; update both", call, s);
    return kInternalError;
  }
  if (is_status(s)) return s;
  // An error of earlier queued CUDA work came back with this call: the application's next
  // cudaGetLastError reports it; the cuBLAS call could not run after it.
  record(static_cast<cudaError_t>(s));
  return kExecutionFailed;
}

void unsupported(const char* name, std::atomic<bool>& logged) noexcept {
  if (!logged.load(std::memory_order_relaxed) && !logged.exchange(true, std::memory_order_relaxed))
    VMCUDA_LOG(kWarn, "cublas", "%s is not supported yet; it returns CUBLAS_STATUS_NOT_SUPPORTED (15)", name);
}

Remote* remote(int* status) noexcept {
  // A sticky error: the context is unusable, as natively every cuBLAS call then fails.
  if (enter_device_call() != cudaSuccess) return *status = kExecutionFailed, nullptr;
  cudaError_t e;
  Remote* r = connected(&e);
  if (!r) *status = kNotInitialized;
  return r;
}

}  // namespace vmcuda::guest::cublas

using namespace vmcuda::guest::cublas;
namespace api = vmcuda::api;
using vmcuda::guest::Remote;

// ---- handles (remoted; the host keeps each in the client's object list)

VMCUDA_CUBLAS_API int cublasCreate_v2(cublasHandle_t* out) {
  if (!out) return kInvalidValue;
  int status;
  Remote* r = remote(&status);
  if (!r) return status;
  auto h = std::make_unique<Handle>();
  h->wire = vmcuda::guest::handles::next();
  h->device = Remote::thread_device();
  api::cublasCreate_v2_Args a{};
  a.handle = h->wire;
  {
    auto lock = r->lock();
    const auto res = r->call<api::Call::cublasCreate_v2>(a);
    if (res.status != 0) return status_of(res.status, "cublasCreate_v2");
  }
  {
    std::lock_guard l(registry().mu);
    registry().live.insert(h.get());
  }
  *out = reinterpret_cast<cublasHandle_t>(h.release());
  return kSuccess;
}

VMCUDA_CUBLAS_API int cublasDestroy_v2(cublasHandle_t handle) {
  Handle* h = reinterpret_cast<Handle*>(handle);
  {
    std::lock_guard l(registry().mu);
    if (!h || !registry().live.erase(h)) return kNotInitialized;
  }
  api::cublasDestroy_v2_Args a{};
  a.handle = h->wire;
  delete h;
  vmcuda::guest::cublaslt::forget_handle(a.handle);  // it may have been a cuBLASLt handle too
  return queue<api::Call::cublasDestroy_v2>(a);
}

VMCUDA_CUBLAS_API int cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  Handle* h;
  if (int s = enter(handle, &h)) return s;
  api::cublasSetStream_v2_Args a{};
  a.handle = h->wire;
  if (vmcuda::guest::stream_wire_handle(stream, false, &a.streamId) != cudaSuccess) return kInvalidValue;
  h->stream = stream;
  return queue<api::Call::cublasSetStream_v2>(a);
}

VMCUDA_CUBLAS_API int cublasGetStream_v2(cublasHandle_t handle, cudaStream_t* stream) {
  Handle* h;
  if (int s = enter(handle, &h)) return s;
  if (!stream) return kInvalidValue;
  *stream = static_cast<cudaStream_t>(h->stream.load());
  return kSuccess;
}

VMCUDA_CUBLAS_API int cublasSetPointerMode_v2(cublasHandle_t handle, int mode) {
  Handle* h;
  if (int s = enter(handle, &h)) return s;
  if (mode != kPointerModeHost && mode != kPointerModeDevice) return kInvalidValue;
  h->pointer_mode = mode;
  api::cublasSetPointerMode_v2_Args a{};
  a.handle = h->wire;
  a.mode = mode;
  return queue<api::Call::cublasSetPointerMode_v2>(a);
}

VMCUDA_CUBLAS_API int cublasGetPointerMode_v2(cublasHandle_t handle, int* mode) {
  Handle* h;
  if (int s = enter(handle, &h)) return s;
  if (!mode) return kInvalidValue;
  *mode = h->pointer_mode;
  return kSuccess;
}

VMCUDA_CUBLAS_API int cublasSetMathMode(cublasHandle_t handle, int mode) {
  Handle* h;
  if (int s = enter(handle, &h)) return s;
  // cublasMath_t: DEFAULT 0, TENSOR_OP 1, PEDANTIC 2, TF32_TENSOR_OP 3, plus the flag
  // DISALLOW_REDUCED_PRECISION_REDUCTION (16). Checked here: the call is queued.
  if ((mode & ~16) > 3) return kInvalidValue;
  h->math_mode = mode;
  api::cublasSetMathMode_Args a{};
  a.handle = h->wire;
  a.mode = mode;
  return queue<api::Call::cublasSetMathMode>(a);
}

VMCUDA_CUBLAS_API int cublasGetMathMode(cublasHandle_t handle, int* mode) {
  Handle* h;
  if (int s = enter(handle, &h)) return s;
  if (!mode) return kInvalidValue;
  *mode = h->math_mode;
  return kSuccess;
}

VMCUDA_CUBLAS_API int cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace, size_t bytes) {
  Handle* h;
  if (int s = enter(handle, &h)) return s;
  api::cublasSetWorkspace_v2_Args a{};
  a.handle = h->wire;
  a.workspace = device_pointer(workspace);
  a.workspaceSizeInBytes = bytes;
  return queue<api::Call::cublasSetWorkspace_v2>(a);
}

// cublasSetEnvironmentMode/GetEnvironmentMode: exported by NVIDIA's libcublas.so.13 but in no
// header; NVIDIA's cuSOLVER calls the setter on its handle. As NVIDIA's library (13.0) does it:
// the mode must be 0 or 1 and is kept in the handle; the host's library is given it too
// (host-stub/src/cublas.cc: a no-op where the host's library lacks the function).
VMCUDA_CUBLAS_API int cublasSetEnvironmentMode(cublasHandle_t handle, int mode) {
  Handle* h;
  if (int s = enter(handle, &h)) return s;
  if (mode != 0 && mode != 1) return kInvalidValue;
  h->environment_mode = mode;
  api::cublasSetEnvironmentMode_Args a{};
  a.handle = h->wire;
  a.mode = mode;
  return queue<api::Call::cublasSetEnvironmentMode>(a);
}

VMCUDA_CUBLAS_API int cublasGetEnvironmentMode(cublasHandle_t handle, int* mode) {
  Handle* h;
  if (int s = enter(handle, &h)) return s;
  if (!mode) return kInvalidValue;
  *mode = h->environment_mode;
  return kSuccess;
}

// ---- answered here

VMCUDA_CUBLAS_API int cublasGetVersion_v2(cublasHandle_t, int* version) {
  if (!version) return kInvalidValue;
  *version = kVersion[0] * 10000 + kVersion[1] * 100 + kVersion[2];
  return kSuccess;
}

VMCUDA_CUBLAS_API int cublasGetProperty(int type, int* value) {
  if (!value || type < 0 || type > 2) return kInvalidValue;  // libraryPropertyType: MAJOR, MINOR, PATCH
  *value = kVersion[type];
  return kSuccess;
}

namespace {
struct StatusText {
  int status;
  const char* name;
  const char* text;
};
// cublasGetStatusName/String, as NVIDIA's library answers them.
constexpr StatusText kStatusText[] = {
    {0, "CUBLAS_STATUS_SUCCESS", "success"},
    {1, "CUBLAS_STATUS_NOT_INITIALIZED", "the library was not initialized"},
    {3, "CUBLAS_STATUS_ALLOC_FAILED", "the resource allocation failed"},
    {7, "CUBLAS_STATUS_INVALID_VALUE", "an invalid numeric value was used as an argument"},
    {8, "CUBLAS_STATUS_ARCH_MISMATCH", "an absent device architectural feature is required"},
    {11, "CUBLAS_STATUS_MAPPING_ERROR", "an access to GPU memory space failed"},
    {13, "CUBLAS_STATUS_EXECUTION_FAILED", "the GPU program failed to execute"},
    {14, "CUBLAS_STATUS_INTERNAL_ERROR", "an internal operation failed"},
    {15, "CUBLAS_STATUS_NOT_SUPPORTED", "the functionality requested is not supported"},
    {16, "CUBLAS_STATUS_LICENSE_ERROR", "error detected trying to check the license"},
};
const StatusText* status_text(int s) {
  for (const auto& t : kStatusText)
    if (t.status == s) return &t;
  return nullptr;
}
}  // namespace

VMCUDA_CUBLAS_API const char* cublasGetStatusName(int status) {
  const StatusText* t = status_text(status);
  return t ? t->name : "CUBLAS_STATUS_UNKNOWN";
}

VMCUDA_CUBLAS_API const char* cublasGetStatusString(int status) {
  const StatusText* t = status_text(status);
  return t ? t->text : "unknown error";
}

// ---- vectors and matrices between host and device memory: the runtime's 2D copies (a
// vector with increments is a column of elemSize-wide rows), as NVIDIA's library does them.
namespace {

int copy_2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
            cudaMemcpyKind kind, cudaStream_t stream, bool async) {
  const cudaError_t e = async ? cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, kind, stream)
                              : cudaMemcpy2D(dst, dpitch, src, spitch, width, height, kind);
  return e == cudaSuccess ? kSuccess : kMappingError;
}

int vector(int n, int elem, const void* x, int incx, void* y, int incy, cudaMemcpyKind kind, cudaStream_t stream,
           bool async) {
  if (n < 0 || elem <= 0 || incx <= 0 || incy <= 0) return kInvalidValue;
  if (n == 0) return kSuccess;
  if (!x || !y) return kInvalidValue;
  return copy_2d(y, size_t(incy) * elem, x, size_t(incx) * elem, size_t(elem), size_t(n), kind, stream, async);
}

int matrix(int rows, int cols, int elem, const void* a, int lda, void* b, int ldb, cudaMemcpyKind kind,
           cudaStream_t stream, bool async) {
  if (rows < 0 || cols < 0 || elem <= 0 || lda <= 0 || ldb <= 0 || lda < rows || ldb < rows) return kInvalidValue;
  if (rows == 0 || cols == 0) return kSuccess;
  if (!a || !b) return kInvalidValue;
  return copy_2d(b, size_t(ldb) * elem, a, size_t(lda) * elem, size_t(rows) * elem, size_t(cols), kind, stream, async);
}

}  // namespace

VMCUDA_CUBLAS_API int cublasSetVector(int n, int elem, const void* x, int incx, void* y, int incy) {
  return vector(n, elem, x, incx, y, incy, cudaMemcpyHostToDevice, nullptr, false);
}
VMCUDA_CUBLAS_API int cublasGetVector(int n, int elem, const void* x, int incx, void* y, int incy) {
  return vector(n, elem, x, incx, y, incy, cudaMemcpyDeviceToHost, nullptr, false);
}
VMCUDA_CUBLAS_API int cublasSetVectorAsync(int n, int elem, const void* x, int incx, void* y, int incy,
                                           cudaStream_t s) {
  return vector(n, elem, x, incx, y, incy, cudaMemcpyHostToDevice, s, true);
}
VMCUDA_CUBLAS_API int cublasGetVectorAsync(int n, int elem, const void* x, int incx, void* y, int incy,
                                           cudaStream_t s) {
  return vector(n, elem, x, incx, y, incy, cudaMemcpyDeviceToHost, s, true);
}
VMCUDA_CUBLAS_API int cublasSetMatrix(int rows, int cols, int elem, const void* a, int lda, void* b, int ldb) {
  return matrix(rows, cols, elem, a, lda, b, ldb, cudaMemcpyHostToDevice, nullptr, false);
}
VMCUDA_CUBLAS_API int cublasGetMatrix(int rows, int cols, int elem, const void* a, int lda, void* b, int ldb) {
  return matrix(rows, cols, elem, a, lda, b, ldb, cudaMemcpyDeviceToHost, nullptr, false);
}
VMCUDA_CUBLAS_API int cublasSetMatrixAsync(int rows, int cols, int elem, const void* a, int lda, void* b, int ldb,
                                           cudaStream_t s) {
  return matrix(rows, cols, elem, a, lda, b, ldb, cudaMemcpyHostToDevice, s, true);
}
VMCUDA_CUBLAS_API int cublasGetMatrixAsync(int rows, int cols, int elem, const void* a, int lda, void* b, int ldb,
                                           cudaStream_t s) {
  return matrix(rows, cols, elem, a, lda, b, ldb, cudaMemcpyDeviceToHost, s, true);
}
