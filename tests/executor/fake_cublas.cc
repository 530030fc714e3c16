// A fake libcublas.so.13 for the test executor (fake_driver.h): a few entry points with NVIDIA's
// ABI, computing on the CPU over the fake device memory, so that CI checks real numbers of
// cuBLAS calls that went through the guest library, the wire and the stub. Argument checks are
// cuBLAS's documented ones (CUBLAS_STATUS_INVALID_VALUE); memory no allocation holds is
// CUBLAS_STATUS_EXECUTION_FAILED (a GPU would fault).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "executor/fake_driver.h"

namespace vmcuda::testing {
namespace {

constexpr int kSuccess = 0, kNotInitialized = 1, kInvalidValue = 7, kExecutionFailed = 13, kNotSupported = 15;
constexpr int kOpN = 0, kOpT = 1, kOpC = 2;
constexpr int kR32F = 0, kR16BF = 14;  // cudaDataType

struct Handle {
  FakeCublasSettings s;
};
std::mutex g_mu;
std::set<Handle*> g_handles;
FakeCublasSettings g_last;

Handle* live(void* h) {
  std::lock_guard l(g_mu);
  return g_handles.count(static_cast<Handle*>(h)) ? static_cast<Handle*>(h) : nullptr;
}
void remember(const Handle& h) {
  std::lock_guard l(g_mu);
  g_last = h.s;
}

float from_bf16(uint16_t v) {
  const uint32_t bits = uint32_t(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
uint16_t to_bf16(float f) {  // round to nearest even (NaN kept a NaN)
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (std::isnan(f)) return 0x7fc0;
  bits += 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}
size_t type_bytes(int t) { return t == kR32F ? 4 : t == kR16BF ? 2 : 0; }
float load(const std::byte* base, int type, size_t i) {
  if (type == kR32F) {
    float f;
    std::memcpy(&f, base + 4 * i, 4);
    return f;
  }
  uint16_t v;
  std::memcpy(&v, base + 2 * i, 2);
  return from_bf16(v);
}
void store(std::byte* base, int type, size_t i, float f) {
  if (type == kR32F) {
    std::memcpy(base + 4 * i, &f, 4);
  } else {
    const uint16_t v = to_bf16(f);
    std::memcpy(base + 2 * i, &v, 2);
  }
}

// A scalar or result: host memory (pointer mode host) or fake device memory.
float* scalar_at(const Handle& h, const FakeDeviceAt& at, const void* p) {
  if (h.s.pointer_mode == 0) return static_cast<float*>(const_cast<void*>(p));
  return reinterpret_cast<float*>(at(reinterpret_cast<uint64_t>(p), 4));
}

// A column-major matrix of `rows` x `cols` (leading dimension ld) at device address p.
std::byte* matrix_at(const FakeDeviceAt& at, const void* p, int rows, int cols, long long ld, size_t elem) {
  if (rows == 0 || cols == 0) return reinterpret_cast<std::byte*>(1);  // nothing read
  return at(reinterpret_cast<uint64_t>(p), ((size_t(cols) - 1) * size_t(ld) + size_t(rows)) * elem);
}
std::byte* vector_at(const FakeDeviceAt& at, const void* p, int n, int inc, size_t elem) {
  if (n == 0) return reinterpret_cast<std::byte*>(1);
  return at(reinterpret_cast<uint64_t>(p), ((size_t(n) - 1) * size_t(inc) + 1) * elem);
}

// C = alpha op(A) op(B) + beta C on one batch entry; pointers resolved. Summation in index
// order in double: the test programs' integer-valued inputs make every result exact.
void gemm_one(int ta, int tb, int m, int n, int k, float alpha, const std::byte* A, int at_, long long lda,
              const std::byte* B, int bt, long long ldb, float beta, std::byte* C, int ct, long long ldc) {
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      double sum = 0;
      for (int l = 0; l < k; ++l) {
        const float a = ta == kOpN ? load(A, at_, i + l * size_t(lda)) : load(A, at_, l + i * size_t(lda));
        const float b = tb == kOpN ? load(B, bt, l + j * size_t(ldb)) : load(B, bt, j + l * size_t(ldb));
        sum += double(a) * double(b);
      }
      const size_t ci = i + j * size_t(ldc);
      const float c = beta == 0.0f ? 0.0f : beta * load(C, ct, ci);  // beta 0: C is not read
      store(C, ct, ci, float(alpha * sum) + c);
    }
}

struct Gemm {
  int ta, tb, m, n, k;
  long long lda, ldb, ldc;
  int atype, btype, ctype;
};
int check(const Gemm& g) {
  if ((g.ta != kOpN && g.ta != kOpT && g.ta != kOpC) || (g.tb != kOpN && g.tb != kOpT && g.tb != kOpC))
    return kInvalidValue;
  if (g.m < 0 || g.n < 0 || g.k < 0) return kInvalidValue;
  const int arows = g.ta == kOpN ? g.m : g.k, brows = g.tb == kOpN ? g.k : g.n;
  if (g.lda < std::max(1, arows) || g.ldb < std::max(1, brows) || g.ldc < std::max(1, g.m)) return kInvalidValue;
  if (!type_bytes(g.atype) || !type_bytes(g.btype) || !type_bytes(g.ctype)) return kNotSupported;
  return kSuccess;
}

// One gemm of a batch: A, B, C device addresses.
int gemm_at(const FakeDeviceAt& at, const Gemm& g, float alpha, float beta, const void* a, const void* b, void* c) {
  const int arows = g.ta == kOpN ? g.m : g.k, acols = g.ta == kOpN ? g.k : g.m;
  const int brows = g.tb == kOpN ? g.k : g.n, bcols = g.tb == kOpN ? g.n : g.k;
  const std::byte* A = matrix_at(at, a, arows, acols, g.lda, type_bytes(g.atype));
  const std::byte* B = matrix_at(at, b, brows, bcols, g.ldb, type_bytes(g.btype));
  std::byte* C = matrix_at(at, c, g.m, g.n, g.ldc, type_bytes(g.ctype));
  if (!A || !B || !C) return kExecutionFailed;
  gemm_one(g.ta, g.tb, g.m, g.n, g.k, alpha, A, g.atype, g.lda, B, g.btype, g.ldb, beta, C, g.ctype, g.ldc);
  return kSuccess;
}

// Runs `body(at, alpha, beta)` with the scalars resolved (float), under the fake GPU's lock.
template <class F>
int with_scalars(Handle* h, const void* alpha, const void* beta, F body) {
  if (!h) return kNotInitialized;
  if (!alpha || !beta) return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    const float* a = scalar_at(*h, at, alpha);
    const float* b = scalar_at(*h, at, beta);
    if (!a || !b) {
      status = kExecutionFailed;
      return;
    }
    status = body(at, *a, *b);
  });
  return status;
}

bool fp32_compute(int compute) {
  // CUBLAS_COMPUTE_32F[_PEDANTIC|_FAST_*], or CUDA_R_32F as older programs pass it.
  return compute == 68 || compute == 69 || compute == 74 || compute == 75 || compute == 77 || compute == kR32F;
}

// ---- the entry points (NVIDIA's signatures, ABI types)

int f_create(void* out_) {  // void*: as f_lt_create
  auto** out = static_cast<void**>(out_);
  if (!out) return kInvalidValue;
  auto* h = new Handle;
  std::lock_guard l(g_mu);
  g_handles.insert(h);
  *out = h;
  return kSuccess;
}
int f_destroy(void* p) {
  std::lock_guard l(g_mu);
  if (!g_handles.erase(static_cast<Handle*>(p))) return kNotInitialized;
  delete static_cast<Handle*>(p);
  return kSuccess;
}
int f_set_stream(void* p, void* stream) {
  Handle* h = live(p);
  if (!h) return kNotInitialized;
  h->s.stream = stream;
  remember(*h);
  return kSuccess;
}
int f_set_pointer_mode(void* p, int mode) {
  Handle* h = live(p);
  if (!h) return kNotInitialized;
  if (mode != 0 && mode != 1) return kInvalidValue;
  h->s.pointer_mode = mode;
  remember(*h);
  return kSuccess;
}
int f_set_math_mode(void* p, int mode) {
  Handle* h = live(p);
  if (!h) return kNotInitialized;
  h->s.math_mode = mode;
  remember(*h);
  return kSuccess;
}
int f_set_workspace(void* p, void* ws, size_t bytes) {
  Handle* h = live(p);
  if (!h) return kNotInitialized;
  h->s.workspace = reinterpret_cast<uint64_t>(ws);
  h->s.workspace_bytes = bytes;
  remember(*h);
  return kSuccess;
}

// Its kernels run on the handle's stream (fake_library_work: the stream's time and busy state).
int f_sgemm(void* p, int ta, int tb, int m, int n, int k, const float* alpha, const void* A, int lda, const void* B,
            int ldb, const float* beta, void* C, int ldc) {
  Handle* h = live(p);
  if (h && k == kFakeGemmNeverEnds) return fake_library_work(h->s.stream, true) ? kSuccess : kExecutionFailed;
  const Gemm g{ta, tb, m, n, k, lda, ldb, ldc, kR32F, kR32F, kR32F};
  if (int s = check(g)) return s;
  const int s = with_scalars(h, alpha, beta, [&](const FakeDeviceAt& at, float a, float b) {
    return gemm_at(at, g, a, b, A, B, C);
  });
  if (s == kSuccess) fake_library_work(h->s.stream, false);
  return s;
}

int f_sgemm_strided(void* p, int ta, int tb, int m, int n, int k, const float* alpha, const void* A, int lda,
                    long long sa, const void* B, int ldb, long long sb, const float* beta, void* C, int ldc,
                    long long sc, int batch) {
  const Gemm g{ta, tb, m, n, k, lda, ldb, ldc, kR32F, kR32F, kR32F};
  if (int s = check(g)) return s;
  if (batch < 0) return kInvalidValue;
  return with_scalars(live(p), alpha, beta, [&](const FakeDeviceAt& at, float a, float b) {
    for (int i = 0; i < batch; ++i)
      if (int s = gemm_at(at, g, a, b, static_cast<const char*>(A) + 4 * sa * i,
                          static_cast<const char*>(B) + 4 * sb * i, static_cast<char*>(C) + 4 * sc * i))
        return s;
    return kSuccess;
  });
}

// Arrays of device pointers in device memory (batched calls).
int f_sgemm_batched(void* p, int ta, int tb, int m, int n, int k, const float* alpha, const void* Aarray, int lda,
                    const void* Barray, int ldb, const float* beta, void* Carray, int ldc, int batch) {
  const Gemm g{ta, tb, m, n, k, lda, ldb, ldc, kR32F, kR32F, kR32F};
  if (int s = check(g)) return s;
  if (batch < 0) return kInvalidValue;
  return with_scalars(live(p), alpha, beta, [&](const FakeDeviceAt& at, float a, float b) {
    if (batch == 0) return kSuccess;
    const std::byte* pa = at(reinterpret_cast<uint64_t>(Aarray), 8 * size_t(batch));
    const std::byte* pb = at(reinterpret_cast<uint64_t>(Barray), 8 * size_t(batch));
    const std::byte* pc = at(reinterpret_cast<uint64_t>(Carray), 8 * size_t(batch));
    if (!pa || !pb || !pc) return kExecutionFailed;
    for (int i = 0; i < batch; ++i) {
      uint64_t x, y, z;
      std::memcpy(&x, pa + 8 * i, 8);
      std::memcpy(&y, pb + 8 * i, 8);
      std::memcpy(&z, pc + 8 * i, 8);
      if (int s = gemm_at(at, g, a, b, reinterpret_cast<void*>(x), reinterpret_cast<void*>(y),
                          reinterpret_cast<void*>(z)))
        return s;
    }
    return kSuccess;
  });
}

int f_gemm_ex(void* p, int ta, int tb, int m, int n, int k, const void* alpha, const void* A, int atype, int lda,
              const void* B, int btype, int ldb, const void* beta, void* C, int ctype, int ldc, int compute, int algo) {
  if (!fp32_compute(compute)) return kNotSupported;
  const Gemm g{ta, tb, m, n, k, lda, ldb, ldc, atype, btype, ctype};
  if (int s = check(g)) return s;
  return with_scalars(live(p), alpha, beta, [&](const FakeDeviceAt& at, float a, float b) {
    return gemm_at(at, g, a, b, A, B, C);
  });
}

int f_gemm_strided_ex(void* p, int ta, int tb, int m, int n, int k, const void* alpha, const void* A, int atype,
                      int lda, long long sa, const void* B, int btype, int ldb, long long sb, const void* beta,
                      void* C, int ctype, int ldc, long long sc, int batch, int compute, int algo) {
  if (!fp32_compute(compute)) return kNotSupported;
  const Gemm g{ta, tb, m, n, k, lda, ldb, ldc, atype, btype, ctype};
  if (int s = check(g)) return s;
  if (batch < 0) return kInvalidValue;
  return with_scalars(live(p), alpha, beta, [&](const FakeDeviceAt& at, float a, float b) {
    for (int i = 0; i < batch; ++i)
      if (int s = gemm_at(at, g, a, b, static_cast<const char*>(A) + type_bytes(atype) * sa * i,
                          static_cast<const char*>(B) + type_bytes(btype) * sb * i,
                          static_cast<char*>(C) + type_bytes(ctype) * sc * i))
        return s;
    return kSuccess;
  });
}

int f_saxpy(void* p, int n, const float* alpha, const void* x, int incx, void* y, int incy) {
  Handle* h = live(p);
  if (!h) return kNotInitialized;
  if (n <= 0) return kSuccess;
  if (!alpha) return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    const float* a = scalar_at(*h, at, alpha);
    const std::byte* X = vector_at(at, x, n, std::abs(incx), 4);
    std::byte* Y = vector_at(at, y, n, std::abs(incy), 4);
    if (!a || !X || !Y || incx <= 0 || incy <= 0) {  // negative increments: not faked
      status = !a || !X || !Y ? kExecutionFailed : kNotSupported;
      return;
    }
    for (int i = 0; i < n; ++i)
      store(Y, kR32F, size_t(i) * incy, *a * load(X, kR32F, size_t(i) * incx) + load(Y, kR32F, size_t(i) * incy));
  });
  return status;
}

int f_sscal(void* p, int n, const float* alpha, void* x, int incx) {
  Handle* h = live(p);
  if (!h) return kNotInitialized;
  if (n <= 0 || incx <= 0) return kSuccess;  // cuBLAS: nothing to do
  if (!alpha) return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    const float* a = scalar_at(*h, at, alpha);
    std::byte* X = vector_at(at, x, n, incx, 4);
    if (!a || !X) {
      status = kExecutionFailed;
      return;
    }
    for (int i = 0; i < n; ++i) store(X, kR32F, size_t(i) * incx, *a * load(X, kR32F, size_t(i) * incx));
  });
  return status;
}

// dot and nrm2: the result is written in host or device memory per the pointer mode.
template <class F>
int reduce(void* p, void* result, F compute) {
  Handle* h = live(p);
  if (!h) return kNotInitialized;
  if (!result) return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    float* r = scalar_at(*h, at, result);
    float v = 0;
    if (!r || !compute(at, &v)) {
      status = kExecutionFailed;
      return;
    }
    *r = v;
  });
  return status;
}

int f_sdot(void* p, int n, const void* x, int incx, const void* y, int incy, void* result) {
  return reduce(p, result, [&](const FakeDeviceAt& at, float* v) {
    if (n <= 0) return true;
    const std::byte* X = vector_at(at, x, n, std::abs(incx), 4);
    const std::byte* Y = vector_at(at, y, n, std::abs(incy), 4);
    if (!X || !Y || incx <= 0 || incy <= 0) return false;
    double s = 0;
    for (int i = 0; i < n; ++i) s += double(load(X, kR32F, size_t(i) * incx)) * load(Y, kR32F, size_t(i) * incy);
    *v = float(s);
    return true;
  });
}

int f_snrm2(void* p, int n, const void* x, int incx, void* result) {
  return reduce(p, result, [&](const FakeDeviceAt& at, float* v) {
    if (n <= 0 || incx <= 0) return true;  // cuBLAS: 0
    const std::byte* X = vector_at(at, x, n, incx, 4);
    if (!X) return false;
    double s = 0;
    for (int i = 0; i < n; ++i) {
      const double e = load(X, kR32F, size_t(i) * incx);
      s += e * e;
    }
    *v = float(std::sqrt(s));
    return true;
  });
}

const std::map<std::string, void*>& table() {
  static const std::map<std::string, void*> t = {
      {"cublasCreate_v2", reinterpret_cast<void*>(f_create)},
      {"cublasDestroy_v2", reinterpret_cast<void*>(f_destroy)},
      {"cublasSetStream_v2", reinterpret_cast<void*>(f_set_stream)},
      {"cublasSetPointerMode_v2", reinterpret_cast<void*>(f_set_pointer_mode)},
      {"cublasSetMathMode", reinterpret_cast<void*>(f_set_math_mode)},
      {"cublasSetWorkspace_v2", reinterpret_cast<void*>(f_set_workspace)},
      {"cublasSgemm_v2", reinterpret_cast<void*>(f_sgemm)},
      {"cublasSgemmBatched", reinterpret_cast<void*>(f_sgemm_batched)},
      {"cublasSgemmStridedBatched", reinterpret_cast<void*>(f_sgemm_strided)},
      {"cublasGemmEx", reinterpret_cast<void*>(f_gemm_ex)},
      {"cublasGemmStridedBatchedEx", reinterpret_cast<void*>(f_gemm_strided_ex)},
      {"cublasSaxpy_v2", reinterpret_cast<void*>(f_saxpy)},
      {"cublasSscal_v2", reinterpret_cast<void*>(f_sscal)},
      {"cublasSdot_v2", reinterpret_cast<void*>(f_sdot)},
      {"cublasSnrm2_v2", reinterpret_cast<void*>(f_snrm2)},
  };
  return t;
}

int g_library_token, g_cufft_token, g_curand_token, g_cusparse_token, g_cusolver_token;

// ---- cuBLASLt ("libcublasLt.so.13"): handles (a cuBLAS handle is one too, as NVIDIA's),
// matmul descriptors, layouts and preferences with the attributes the fake reads, a heuristic
// that answers one algorithm, and cublasLtMatmul on the CPU: D = epilogue(alpha op(A) op(B) +
// beta C [+ bias]) for fp32/bf16 column-major matrices (strided batches) with fp32 compute.

constexpr uint64_t kFakeAlgo = 0x766d637564616c74ull;  // the one algorithm's first word ("vmcudalt")

struct LtHandle {};
struct LtDesc {
  int compute = 0, scale = 0, pointer_mode = 0, transa = kOpN, transb = kOpN, epilogue = 1, bias_type = -1;
  uint64_t bias = 0;
  std::map<int, std::vector<uint8_t>> other;  // attributes the fake keeps but does not read
};
struct LtLayout {
  int type = kR32F, order = 0, batch = 1;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0, stride = 0;
};
struct LtPref {
  uint64_t max_workspace = 0;
  std::map<int, std::vector<uint8_t>> other;
};
std::set<void*> g_lt_live;  // every live LtHandle, LtDesc, LtLayout, LtPref (under g_mu)

template <class T>
T* lt_live(void* p) {
  std::lock_guard l(g_mu);
  return g_lt_live.count(p) ? static_cast<T*>(p) : nullptr;
}
bool lt_handle_ok(void* p) { return lt_live<LtHandle>(p) || live(p); }

template <class T, class... A>
int lt_create(void** out, A... init) {
  if (!out) return kInvalidValue;
  T* t = new T{init...};
  std::lock_guard l(g_mu);
  g_lt_live.insert(t);
  *out = t;
  return kSuccess;
}
template <class T>
int lt_destroy(void* p) {
  if (!p) return kSuccess;
  std::lock_guard l(g_mu);
  if (!g_lt_live.erase(p)) return kInvalidValue;
  delete static_cast<T*>(p);
  return kSuccess;
}

// An attribute of `bytes` into/out of a field of that size (the library's check).
template <class F>
int put(F* field, const void* buf, size_t bytes) {
  if (!buf || bytes != sizeof(F)) return kInvalidValue;
  std::memcpy(field, buf, sizeof(F));
  return kSuccess;
}
template <class F>
int get(const F& field, void* buf, size_t bytes, size_t* written) {
  if (bytes == 0) {
    if (!written) return kInvalidValue;
    *written = sizeof(F);
    return kSuccess;
  }
  if (!buf || bytes != sizeof(F)) return kInvalidValue;
  std::memcpy(buf, &field, sizeof(F));
  if (written) *written = sizeof(F);
  return kSuccess;
}
int put_other(std::map<int, std::vector<uint8_t>>& m, int attr, const void* buf, size_t bytes) {
  if (!buf || bytes == 0) return kInvalidValue;
  m[attr].assign(static_cast<const uint8_t*>(buf), static_cast<const uint8_t*>(buf) + bytes);
  return kSuccess;
}
int get_other(const std::map<int, std::vector<uint8_t>>& m, int attr, void* buf, size_t bytes, size_t* written) {
  auto it = m.find(attr);
  if (it == m.end()) return kInvalidValue;  // the fake knows no default for it
  if (bytes == 0) {
    if (!written) return kInvalidValue;
    *written = it->second.size();
    return kSuccess;
  }
  if (!buf || bytes != it->second.size()) return kInvalidValue;
  std::memcpy(buf, it->second.data(), bytes);
  if (written) *written = bytes;
  return kSuccess;
}

// Out-handles are void* as in the host's generated table (cublasLt_host_api.h): a call through
// another function type is undefined (UBSan's -fsanitize=function in the session fuzzer).
int f_lt_create(void* out) { return lt_create<LtHandle>(static_cast<void**>(out)); }
int f_lt_destroy(void* p) { return lt_live<LtHandle>(p) ? lt_destroy<LtHandle>(p) : kNotInitialized; }
int f_desc_create(void* out_, int compute, int scale) {
  auto** out = static_cast<void**>(out_);
  LtDesc d;
  d.compute = compute;
  d.scale = scale;
  if (!out) return kInvalidValue;
  auto* t = new LtDesc(d);
  std::lock_guard l(g_mu);
  g_lt_live.insert(t);
  *out = t;
  return kSuccess;
}
int f_desc_destroy(void* p) { return lt_destroy<LtDesc>(p); }
int f_desc_set(void* p, int attr, const void* buf, size_t bytes) {
  LtDesc* d = lt_live<LtDesc>(p);
  if (!d) return kInvalidValue;
  switch (attr) {
    case 0: return put(&d->compute, buf, bytes);
    case 1: return put(&d->scale, buf, bytes);
    case 2: return put(&d->pointer_mode, buf, bytes);
    case 3: return put(&d->transa, buf, bytes);
    case 4: return put(&d->transb, buf, bytes);
    case 7: return put(&d->epilogue, buf, bytes);
    case 8: return put(&d->bias, buf, bytes);
    case 26: return put(&d->bias_type, buf, bytes);
  }
  return put_other(d->other, attr, buf, bytes);
}
int f_desc_get(void* p, int attr, void* buf, size_t bytes, size_t* written) {
  LtDesc* d = lt_live<LtDesc>(p);
  if (!d) return kInvalidValue;
  switch (attr) {
    case 0: return get(d->compute, buf, bytes, written);
    case 1: return get(d->scale, buf, bytes, written);
    case 2: return get(d->pointer_mode, buf, bytes, written);
    case 3: return get(d->transa, buf, bytes, written);
    case 4: return get(d->transb, buf, bytes, written);
    case 7: return get(d->epilogue, buf, bytes, written);
    case 8: return get(d->bias, buf, bytes, written);
    case 26: return get(d->bias_type, buf, bytes, written);
  }
  return get_other(d->other, attr, buf, bytes, written);
}
int f_layout_create(void* out_, int type, unsigned long long rows, unsigned long long cols, long long ld) {
  auto** out = static_cast<void**>(out_);
  if (!out) return kInvalidValue;
  auto* t = new LtLayout;
  t->type = type;
  t->rows = rows;
  t->cols = cols;
  t->ld = ld;
  std::lock_guard l(g_mu);
  g_lt_live.insert(t);
  *out = t;
  return kSuccess;
}
int f_layout_destroy(void* p) { return lt_destroy<LtLayout>(p); }
int f_layout_set(void* p, int attr, const void* buf, size_t bytes) {
  LtLayout* t = lt_live<LtLayout>(p);
  if (!t) return kInvalidValue;
  switch (attr) {
    case 0: return put(&t->type, buf, bytes);
    case 1: return put(&t->order, buf, bytes);
    case 2: return put(&t->rows, buf, bytes);
    case 3: return put(&t->cols, buf, bytes);
    case 4: return put(&t->ld, buf, bytes);
    case 5: return put(&t->batch, buf, bytes);
    case 6: return put(&t->stride, buf, bytes);
  }
  return kInvalidValue;
}
int f_layout_get(void* p, int attr, void* buf, size_t bytes, size_t* written) {
  LtLayout* t = lt_live<LtLayout>(p);
  if (!t) return kInvalidValue;
  switch (attr) {
    case 0: return get(t->type, buf, bytes, written);
    case 1: return get(t->order, buf, bytes, written);
    case 2: return get(t->rows, buf, bytes, written);
    case 3: return get(t->cols, buf, bytes, written);
    case 4: return get(t->ld, buf, bytes, written);
    case 5: return get(t->batch, buf, bytes, written);
    case 6: return get(t->stride, buf, bytes, written);
  }
  return kInvalidValue;
}
int f_pref_create(void* out) { return lt_create<LtPref>(static_cast<void**>(out)); }
int f_pref_destroy(void* p) { return lt_destroy<LtPref>(p); }
int f_pref_set(void* p, int attr, const void* buf, size_t bytes) {
  LtPref* t = lt_live<LtPref>(p);
  if (!t) return kInvalidValue;
  return attr == 1 ? put(&t->max_workspace, buf, bytes) : put_other(t->other, attr, buf, bytes);
}
int f_pref_get(void* p, int attr, void* buf, size_t bytes, size_t* written) {
  LtPref* t = lt_live<LtPref>(p);
  if (!t) return kInvalidValue;
  return attr == 1 ? get(t->max_workspace, buf, bytes, written) : get_other(t->other, attr, buf, bytes, written);
}

// The problem a descriptor and four layouts describe, checked as the fake supports it.
struct LtProblem {
  const LtDesc* d;
  const LtLayout *a, *b, *c, *dd;
  int m, n, k;
};
int lt_problem(void* desc, void* a, void* b, void* c, void* d, LtProblem* p) {
  p->d = lt_live<LtDesc>(desc);
  p->a = lt_live<LtLayout>(a);
  p->b = lt_live<LtLayout>(b);
  p->c = lt_live<LtLayout>(c);
  p->dd = lt_live<LtLayout>(d);
  if (!p->d || !p->a || !p->b || !p->c || !p->dd) return kInvalidValue;
  if (!fp32_compute(p->d->compute) || p->d->scale != kR32F) return kNotSupported;
  for (const LtLayout* l : {p->a, p->b, p->c, p->dd})
    if (l->order != 0 || !type_bytes(l->type) || l->batch < 1) return kNotSupported;
  const int e = p->d->epilogue;
  if (e != 1 && e != 2 && e != 4 && e != 6) return kNotSupported;  // DEFAULT, RELU, BIAS, RELU_BIAS
  if (p->d->pointer_mode != 0 && p->d->pointer_mode != 1) return kNotSupported;
  p->m = int(p->dd->rows);
  p->n = int(p->dd->cols);
  p->k = int(p->d->transa == kOpN ? p->a->cols : p->a->rows);
  const uint64_t arows = p->d->transa == kOpN ? p->m : p->k, brows = p->d->transb == kOpN ? p->k : p->n,
                 bcols = p->d->transb == kOpN ? p->n : p->k;
  if (p->a->rows != arows || p->b->rows != brows || p->b->cols != bcols || p->c->rows != p->dd->rows ||
      p->c->cols != p->dd->cols || p->c->type != p->dd->type)
    return kInvalidValue;
  for (const LtLayout* l : {p->a, p->b, p->c, p->dd})
    if (l->ld < int64_t(std::max<uint64_t>(1, l->rows)) || l->batch != p->dd->batch) return kInvalidValue;
  return kSuccess;
}

// The algorithm calls. The fake's cublasLtMatmulAlgo_t: word 0 kFakeAlgo, word 1 the id,
// then the config attributes it keeps (tile id, split-k count, stages id).
struct FakeAlgo {
  uint64_t marker = kFakeAlgo, id = 0;
  uint32_t tile = 0;
  int32_t splitk = 1;
  uint32_t stages = 0;
  uint8_t rest[36]{};
};
static_assert(sizeof(FakeAlgo) == 64);
std::atomic<uint64_t> g_heuristic_calls{0};

int f_heuristic(void* h, void* desc, void* a, void* b, void* c, void* d, void* pref, int requested, void* results,
                int* returned) {
  g_heuristic_calls.fetch_add(1, std::memory_order_relaxed);
  if (!lt_handle_ok(h)) return kNotInitialized;
  if (!lt_live<LtPref>(pref) || requested <= 0 || !results || !returned) return kInvalidValue;
  LtProblem p;
  if (int s = lt_problem(desc, a, b, c, d, &p)) return s;
  uint8_t r[96] = {};
  const FakeAlgo algo;  // id 0, split-k 1; workspaceSize 0, state success
  std::memcpy(r, &algo, sizeof algo);
  const float waves = 1.0f;
  std::memcpy(r + 76, &waves, 4);
  std::memcpy(results, r, sizeof r);
  *returned = 1;
  return kSuccess;
}

int f_lt_matmul(void* h, void* desc, const void* alpha, const void* A, void* adesc, const void* B, void* bdesc,
                const void* beta, const void* C, void* cdesc, void* D, void* ddesc, const void* algo, void* ws,
                size_t ws_bytes, void* stream) {
  if (!lt_handle_ok(h)) return kNotInitialized;
  LtProblem p;
  if (int s = lt_problem(desc, adesc, bdesc, cdesc, ddesc, &p)) return s;
  if (algo) {
    uint64_t first;
    std::memcpy(&first, algo, 8);
    if (first != kFakeAlgo) return kInvalidValue;  // not the heuristic's algorithm, bytes changed on the way
  }
  if (!alpha || !beta) return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    Handle scalars;
    scalars.s.pointer_mode = p.d->pointer_mode;
    const float* al = scalar_at(scalars, at, alpha);
    const float* be = scalar_at(scalars, at, beta);
    if (!al || !be) {
      status = kExecutionFailed;
      return;
    }
    const int bias_type = p.d->bias_type >= 0 ? p.d->bias_type : p.dd->type;
    const bool bias = p.d->epilogue & 4, relu = p.d->epilogue & 2;
    for (int batch = 0; batch < p.dd->batch; ++batch) {
      auto matrix = [&](const void* base, const LtLayout* l, int rows, int cols) {
        const size_t e = type_bytes(l->type);
        return matrix_at(at, static_cast<const char*>(base) + e * l->stride * batch, rows, cols, l->ld, e);
      };
      const int ar = p.d->transa == kOpN ? p.m : p.k, ac = p.d->transa == kOpN ? p.k : p.m;
      const int br = p.d->transb == kOpN ? p.k : p.n, bc = p.d->transb == kOpN ? p.n : p.k;
      const std::byte* Am = matrix(A, p.a, ar, ac);
      const std::byte* Bm = matrix(B, p.b, br, bc);
      const std::byte* Cm = matrix(C, p.c, p.m, p.n);
      std::byte* Dm = matrix(D, p.dd, p.m, p.n);
      const std::byte* bv = bias ? vector_at(at, reinterpret_cast<const void*>(p.d->bias), p.m, 1,
                                             type_bytes(bias_type))
                                 : reinterpret_cast<const std::byte*>(1);
      if (!Am || !Bm || !Cm || !Dm || !bv || (bias && !type_bytes(bias_type))) {
        status = kExecutionFailed;
        return;
      }
      for (int j = 0; j < p.n; ++j)
        for (int i = 0; i < p.m; ++i) {
          double sum = 0;
          for (int l = 0; l < p.k; ++l) {
            const float x = p.d->transa == kOpN ? load(Am, p.a->type, i + l * size_t(p.a->ld))
                                                : load(Am, p.a->type, l + i * size_t(p.a->ld));
            const float y = p.d->transb == kOpN ? load(Bm, p.b->type, l + j * size_t(p.b->ld))
                                                : load(Bm, p.b->type, j + l * size_t(p.b->ld));
            sum += double(x) * double(y);
          }
          float v = float(*al * sum) + (*be == 0.0f ? 0.0f : *be * load(Cm, p.c->type, i + j * size_t(p.c->ld)));
          if (bias) v += load(bv, bias_type, size_t(i));
          if (relu) v = std::max(v, 0.0f);
          store(Dm, p.dd->type, i + j * size_t(p.dd->ld), v);
        }
    }
  });
  return status;
}

constexpr uint32_t kFakeTiles[] = {15, 18, 20};  // CUBLASLT_MATMUL_TILE_* the fake claims

bool fake_types(int compute, int scale, int a, int b, int c, int d) {
  return fp32_compute(compute) && scale == kR32F && type_bytes(a) && type_bytes(b) && type_bytes(c) && c == d;
}
int f_algo_get_ids(void* h, int compute, int scale, int a, int b, int c, int d, int requested, int* ids, int* returned) {
  if (!lt_handle_ok(h)) return kNotInitialized;
  if (requested <= 0 || !ids || !returned) return kInvalidValue;
  int n = 0;
  if (fake_types(compute, scale, a, b, c, d))
    for (int id : {0, 1})
      if (n < requested) ids[n++] = id;
  *returned = n;
  return kSuccess;
}
int f_algo_init(void* h, int compute, int scale, int a, int b, int c, int d, int id, void* algo) {
  if (!lt_handle_ok(h)) return kNotInitialized;
  if (!algo || id < 0 || id > 1) return kInvalidValue;
  if (!fake_types(compute, scale, a, b, c, d)) return kNotSupported;
  FakeAlgo f;
  f.id = uint64_t(id);
  std::memcpy(algo, &f, sizeof f);
  return kSuccess;
}
const FakeAlgo* fake_algo(const void* algo) {
  static thread_local FakeAlgo f;
  if (!algo) return nullptr;
  std::memcpy(&f, algo, sizeof f);
  return f.marker == kFakeAlgo && f.id <= 1 ? &f : nullptr;
}
int f_algo_check(void* h, void* desc, void* a, void* b, void* c, void* d, const void* algo, void* result) {
  if (!lt_handle_ok(h)) return kNotInitialized;
  LtProblem p;
  if (int s = lt_problem(desc, a, b, c, d, &p)) return s;
  const FakeAlgo* f = fake_algo(algo);
  if (!f || !result) return kInvalidValue;
  if (f->splitk < 1 || f->splitk > p.k) return kNotSupported;
  uint8_t r[96];
  std::memcpy(r, result, sizeof r);  // the algo field is never updated
  const uint64_t workspace = f->splitk > 1 ? uint64_t(p.m) * p.n * 4 * f->splitk : 0;
  const int32_t state = kSuccess;
  const float waves = 0.5f * float(f->id + 1);
  std::memcpy(r + 64, &workspace, 8);
  std::memcpy(r + 72, &state, 4);
  std::memcpy(r + 76, &waves, 4);
  std::memcpy(result, r, sizeof r);
  return kSuccess;
}
int f_algo_cap(const void* algo, int attr, void* buf, size_t bytes, size_t* written) {
  const FakeAlgo* f = fake_algo(algo);
  if (!f) return kInvalidValue;
  if (attr == 6) {  // CUBLASLT_ALGO_CAP_TILE_IDS: an array; size 0 asks its size
    if (bytes == 0) {
      if (!written) return kInvalidValue;
      *written = sizeof kFakeTiles;
      return kSuccess;
    }
    if (!buf) return kInvalidValue;
    const size_t n = std::min(bytes, sizeof kFakeTiles) / 4 * 4;
    std::memcpy(buf, kFakeTiles, n);
    if (written) *written = n;
    return kSuccess;
  }
  if (attr == 0) return get(int32_t{1}, buf, bytes, written);  // SPLITK_SUPPORT
  if (attr == 16) return get(uint32_t{16}, buf, bytes, written);  // MIN_ALIGNMENT_A_BYTES
  return kInvalidValue;
}
int f_algo_config_set(void* algo, int attr, const void* buf, size_t bytes) {
  FakeAlgo f;
  if (!fake_algo(algo)) return kInvalidValue;
  std::memcpy(&f, algo, sizeof f);
  int s = kInvalidValue;  // CUBLASLT_ALGO_CONFIG_ID is read-only
  if (attr == 1) s = put(&f.tile, buf, bytes);
  if (attr == 2) s = put(&f.splitk, buf, bytes);
  if (attr == 6) s = put(&f.stages, buf, bytes);
  if (s == kSuccess) std::memcpy(algo, &f, sizeof f);
  return s;
}
int f_algo_config_get(const void* algo, int attr, void* buf, size_t bytes, size_t* written) {
  const FakeAlgo* f = fake_algo(algo);
  if (!f) return kInvalidValue;
  switch (attr) {
    case 0: return get(int32_t(f->id), buf, bytes, written);
    case 1: return get(f->tile, buf, bytes, written);
    case 2: return get(f->splitk, buf, bytes, written);
    case 6: return get(f->stages, buf, bytes, written);
  }
  return kInvalidValue;
}

const std::map<std::string, void*>& lt_table() {
  static const std::map<std::string, void*> t = {
      {"cublasLtCreate", reinterpret_cast<void*>(f_lt_create)},
      {"cublasLtDestroy", reinterpret_cast<void*>(f_lt_destroy)},
      {"cublasLtMatmulDescCreate", reinterpret_cast<void*>(f_desc_create)},
      {"cublasLtMatmulDescDestroy", reinterpret_cast<void*>(f_desc_destroy)},
      {"cublasLtMatmulDescSetAttribute", reinterpret_cast<void*>(f_desc_set)},
      {"cublasLtMatmulDescGetAttribute", reinterpret_cast<void*>(f_desc_get)},
      {"cublasLtMatrixLayoutCreate", reinterpret_cast<void*>(f_layout_create)},
      {"cublasLtMatrixLayoutDestroy", reinterpret_cast<void*>(f_layout_destroy)},
      {"cublasLtMatrixLayoutSetAttribute", reinterpret_cast<void*>(f_layout_set)},
      {"cublasLtMatrixLayoutGetAttribute", reinterpret_cast<void*>(f_layout_get)},
      {"cublasLtMatmulPreferenceCreate", reinterpret_cast<void*>(f_pref_create)},
      {"cublasLtMatmulPreferenceDestroy", reinterpret_cast<void*>(f_pref_destroy)},
      {"cublasLtMatmulPreferenceSetAttribute", reinterpret_cast<void*>(f_pref_set)},
      {"cublasLtMatmulPreferenceGetAttribute", reinterpret_cast<void*>(f_pref_get)},
      {"cublasLtMatmulAlgoGetHeuristic", reinterpret_cast<void*>(f_heuristic)},
      {"cublasLtMatmul", reinterpret_cast<void*>(f_lt_matmul)},
      {"cublasLtMatmulAlgoGetIds", reinterpret_cast<void*>(f_algo_get_ids)},
      {"cublasLtMatmulAlgoInit", reinterpret_cast<void*>(f_algo_init)},
      {"cublasLtMatmulAlgoCheck", reinterpret_cast<void*>(f_algo_check)},
      {"cublasLtMatmulAlgoCapGetAttribute", reinterpret_cast<void*>(f_algo_cap)},
      {"cublasLtMatmulAlgoConfigSetAttribute", reinterpret_cast<void*>(f_algo_config_set)},
      {"cublasLtMatmulAlgoConfigGetAttribute", reinterpret_cast<void*>(f_algo_config_get)},
  };
  return t;
}

int g_lt_library_token;

}  // namespace

void* fake_open_library(const char* soname, std::string* why) {
  if (std::string(soname) == "libcublas.so.13") return &g_library_token;
  if (std::string(soname) == "libcufft.so.12") return &g_cufft_token;
  if (std::string(soname) == "libcurand.so.10") return &g_curand_token;
  if (std::string(soname) == "libcusparse.so.12") return &g_cusparse_token;
  if (std::string(soname) == "libcusolver.so.12") return &g_cusolver_token;
  if (std::string(soname) == "libcublasLt.so.13") return &g_lt_library_token;
  if (std::string(soname) == "libcudnn.so.9") return fake_cudnn_library();
  if (why) *why = std::string(soname) + ": the test executor has no such library";
  return nullptr;
}

void* fake_library_symbol(void* library, const char* name) {
  if (library == &g_cufft_token) return fake_cufft_symbol(name);
  if (library == &g_curand_token) return fake_curand_symbol(name);
  if (library == &g_cusparse_token) return fake_cusparse_symbol(name);
  if (library == &g_cusolver_token) return fake_cusolver_symbol(name);
  if (library == fake_cudnn_library()) return fake_cudnn_symbol(library, name);
  static const std::map<std::string, void*> none;
  const auto& t = library == &g_library_token ? table() : library == &g_lt_library_token ? lt_table() : none;
  auto it = t.find(name);
  return it == t.end() ? nullptr : it->second;
}

uint64_t fake_live_cublaslt_objects() {
  std::lock_guard l(g_mu);
  return g_lt_live.size();
}

uint64_t fake_cublaslt_heuristic_calls() { return g_heuristic_calls.load(); }

uint64_t fake_live_cublas_handles() {
  std::lock_guard l(g_mu);
  return g_handles.size();
}

FakeCublasSettings fake_cublas_last_settings() {
  std::lock_guard l(g_mu);
  return g_last;
}

}  // namespace vmcuda::testing
