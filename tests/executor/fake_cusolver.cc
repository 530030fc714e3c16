// A fake libcusolver.so.12 for the test executor (fake_driver.h): handles, parameter objects,
// syevj/gesvdj information objects (their settings; syevj honours sorting and sweeps), and dense LU (getrf/getrs with partial pivoting), Cholesky (potrf/potrs) and the symmetric
// eigenvalue solver (syevd, by Jacobi rotations), fp32 and fp64, column-major, in the legacy
// (S/D) and the 64-bit generic (X) forms, computed on the CPU over the fake device memory. info
// is written to device memory as the library does. A FAKE: what the tests need; other entry
// points are missing (the stub answers CUSOLVER_STATUS_NOT_SUPPORTED). Memory no allocation
// holds is CUSOLVER_STATUS_EXECUTION_FAILED (a GPU would fault).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "executor/fake_driver.h"

namespace vmcuda::testing {
namespace {

constexpr int kSuccess = 0, kNotInitialized = 1, kInvalidValue = 3, kExecutionFailed = 6, kNotSupported = 9;
constexpr int kR32F = 0, kR64F = 1, kLower = 0, kUpper = 1;

struct Object {
  int kind = 0;  // 0 handle, 1 parameters, 2 syevj information, 3 gesvdj information
  void* stream = nullptr;
  // information objects: what cusolverDnX{syevj,gesvdj}Set* set (NVIDIA's defaults)
  double tolerance = 0;
  int max_sweeps = 100, sort = 1;
};
std::mutex g_mu;
std::set<Object*> g_live;

bool live(void* p, int kind) {
  auto* o = static_cast<Object*>(p);
  return g_live.count(o) && o->kind == kind;
}
int make(void** out, int kind) {
  if (!out) return kInvalidValue;
  std::lock_guard l(g_mu);
  auto* o = new Object{kind};
  g_live.insert(o);
  *out = o;
  return kSuccess;
}
int destroy(void* p, int kind) {
  std::lock_guard l(g_mu);
  if (!live(p, kind)) return kind == 0 ? kNotInitialized : kInvalidValue;
  g_live.erase(static_cast<Object*>(p));
  delete static_cast<Object*>(p);
  return kSuccess;
}
bool handle_ok(void* h) {
  std::lock_guard l(g_mu);
  return live(h, 0);
}
bool params_ok(void* p) {
  std::lock_guard l(g_mu);
  return live(p, 1);
}

int f_create(void** h) { return make(h, 0); }
int f_destroy(void* h) { return destroy(h, 0); }
int f_create_params(void** p) { return make(p, 1); }
int f_destroy_params(void* p) { return destroy(p, 1); }
int f_set_stream(void* h, void* s) {
  std::lock_guard l(g_mu);
  if (!live(h, 0)) return kNotInitialized;
  static_cast<Object*>(h)->stream = s;
  return kSuccess;
}
int f_set_adv_options(void* p, int, int) { return params_ok(p) ? kSuccess : kInvalidValue; }
int f_create_syevj_info(void** p) { return make(p, 2); }
int f_destroy_syevj_info(void* p) { return destroy(p, 2); }
int f_create_gesvdj_info(void** p) { return make(p, 3); }
int f_destroy_gesvdj_info(void* p) { return destroy(p, 3); }
template <int Kind>
int f_info_tolerance(void* p, double t) {
  std::lock_guard l(g_mu);
  if (!live(p, Kind) || t < 0) return kInvalidValue;
  static_cast<Object*>(p)->tolerance = t;
  return kSuccess;
}
template <int Kind>
int f_info_sweeps(void* p, int n) {
  std::lock_guard l(g_mu);
  if (!live(p, Kind) || n <= 0) return kInvalidValue;
  static_cast<Object*>(p)->max_sweeps = n;
  return kSuccess;
}
template <int Kind>
int f_info_sort(void* p, int sort) {
  std::lock_guard l(g_mu);
  if (!live(p, Kind)) return kInvalidValue;
  static_cast<Object*>(p)->sort = sort != 0;
  return kSuccess;
}

// A column-major matrix of the fake device memory as doubles, and back.
struct Mat {
  std::byte* p = nullptr;
  int64_t rows = 0, cols = 0, ld = 0;
  int type = kR64F;
  size_t eb() const { return type == kR32F ? 4 : 8; }
  double get(int64_t i, int64_t j) const {
    const std::byte* q = p + (i + j * ld) * eb();
    if (type == kR32F) {
      float f;
      std::memcpy(&f, q, 4);
      return f;
    }
    double d;
    std::memcpy(&d, q, 8);
    return d;
  }
  void set(int64_t i, int64_t j, double v) const {
    std::byte* q = p + (i + j * ld) * eb();
    if (type == kR32F) {
      const float f = static_cast<float>(v);
      std::memcpy(q, &f, 4);
    } else {
      std::memcpy(q, &v, 8);
    }
  }
};
size_t matrix_bytes(int64_t rows, int64_t cols, int64_t ld, int type) {
  return rows && cols ? ((cols - 1) * ld + rows) * (type == kR32F ? 4 : 8) : 0;
}
bool map(const FakeDeviceAt& at, const void* ptr, int64_t rows, int64_t cols, int64_t ld, int type, Mat* m) {
  m->rows = rows, m->cols = cols, m->ld = ld, m->type = type;
  const size_t bytes = matrix_bytes(rows, cols, ld, type);
  if (!bytes) return true;
  m->p = at(reinterpret_cast<uint64_t>(ptr), bytes);
  return m->p != nullptr;
}
bool put_int(const FakeDeviceAt& at, void* ptr, int v) {
  if (!ptr) return true;
  std::byte* p = at(reinterpret_cast<uint64_t>(ptr), 4);
  if (p) std::memcpy(p, &v, 4);
  return p != nullptr;
}
// Pivots as the library stores them (1-based), 32- or 64-bit.
struct Pivots {
  std::byte* p = nullptr;
  bool wide = false;
  int64_t get(int64_t i) const {
    if (wide) {
      int64_t v;
      std::memcpy(&v, p + 8 * i, 8);
      return v;
    }
    int32_t v;
    std::memcpy(&v, p + 4 * i, 4);
    return v;
  }
  void set(int64_t i, int64_t v) const {
    if (wide) std::memcpy(p + 8 * i, &v, 8);
    else {
      const int32_t w = static_cast<int32_t>(v);
      std::memcpy(p + 4 * i, &w, 4);
    }
  }
};

// Runs `f(at)` (a status) over the fake device memory.
template <class F>
int on_device(F f) {
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) { status = f(at); });
  return status;
}

// ---- LU with partial pivoting (LAPACK getrf: info = the first zero pivot, 1-based)
int getrf(int64_t m, int64_t n, void* a, int64_t lda, int type, void* ipiv, bool wide, void* info) {
  if (m < 0 || n < 0 || lda < std::max<int64_t>(1, m)) return kInvalidValue;
  return on_device([&](const FakeDeviceAt& at) {
    Mat A;
    if (!map(at, a, m, n, lda, type, &A)) return kExecutionFailed;
    Pivots piv{nullptr, wide};
    const int64_t k = std::min(m, n);
    if (ipiv && k && !(piv.p = at(reinterpret_cast<uint64_t>(ipiv), k * (wide ? 8 : 4)))) return kExecutionFailed;
    int first_zero = 0;
    for (int64_t j = 0; j < k; ++j) {
      int64_t p = j;
      if (piv.p)
        for (int64_t i = j + 1; i < m; ++i)
          if (std::fabs(A.get(i, j)) > std::fabs(A.get(p, j))) p = i;
      if (piv.p) piv.set(j, p + 1);
      if (p != j)
        for (int64_t c = 0; c < n; ++c) {
          const double t = A.get(j, c);
          A.set(j, c, A.get(p, c));
          A.set(p, c, t);
        }
      const double d = A.get(j, j);
      if (d == 0) {
        if (!first_zero) first_zero = static_cast<int>(j + 1);
        continue;
      }
      for (int64_t i = j + 1; i < m; ++i) {
        const double l = A.get(i, j) / d;
        A.set(i, j, l);
        for (int64_t c = j + 1; c < n; ++c) A.set(i, c, A.get(i, c) - l * A.get(j, c));
      }
    }
    return put_int(at, info, first_zero) ? kSuccess : kExecutionFailed;
  });
}
int getrs(int trans, int64_t n, int64_t nrhs, const void* a, int64_t lda, int type, const void* ipiv, bool wide,
          void* b, int64_t ldb, void* info) {
  if (n < 0 || nrhs < 0 || lda < std::max<int64_t>(1, n) || ldb < std::max<int64_t>(1, n) || trans < 0 || trans > 2)
    return kInvalidValue;
  return on_device([&](const FakeDeviceAt& at) {
    Mat A, B;
    if (!map(at, a, n, n, lda, type, &A) || !map(at, b, n, nrhs, ldb, type, &B)) return kExecutionFailed;
    Pivots piv{nullptr, wide};
    if (ipiv && n && !(piv.p = at(reinterpret_cast<uint64_t>(ipiv), n * (wide ? 8 : 4)))) return kExecutionFailed;
    for (int64_t c = 0; c < nrhs; ++c) {
      std::vector<double> x(n);
      for (int64_t i = 0; i < n; ++i) x[i] = B.get(i, c);
      if (trans == 0) {
        if (piv.p)
          for (int64_t i = 0; i < n; ++i) std::swap(x[i], x[piv.get(i) - 1]);
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < i; ++j) x[i] -= A.get(i, j) * x[j];
        for (int64_t i = n - 1; i >= 0; --i) {
          for (int64_t j = i + 1; j < n; ++j) x[i] -= A.get(i, j) * x[j];
          x[i] /= A.get(i, i);
        }
      } else {  // A^T x = b: U^T y = b, L^T z = y, then the pivots backwards
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t j = 0; j < i; ++j) x[i] -= A.get(j, i) * x[j];
          x[i] /= A.get(i, i);
        }
        for (int64_t i = n - 1; i >= 0; --i)
          for (int64_t j = i + 1; j < n; ++j) x[i] -= A.get(j, i) * x[j];
        if (piv.p)
          for (int64_t i = n - 1; i >= 0; --i) std::swap(x[i], x[piv.get(i) - 1]);
      }
      for (int64_t i = 0; i < n; ++i) B.set(i, c, x[i]);
    }
    return put_int(at, info, 0) ? kSuccess : kExecutionFailed;
  });
}

// ---- Cholesky (info = the order of the first leading minor that is not positive definite)
int potrf(int uplo, int64_t n, void* a, int64_t lda, int type, void* info) {
  if (n < 0 || lda < std::max<int64_t>(1, n) || (uplo != kLower && uplo != kUpper)) return kInvalidValue;
  return on_device([&](const FakeDeviceAt& at) {
    Mat A;
    if (!map(at, a, n, n, lda, type, &A)) return kExecutionFailed;
    // L(i, j) is A(i, j) lower, A(j, i) upper (U = L^T).
    auto get = [&](int64_t i, int64_t j) { return uplo == kLower ? A.get(i, j) : A.get(j, i); };
    auto set = [&](int64_t i, int64_t j, double v) { uplo == kLower ? A.set(i, j, v) : A.set(j, i, v); };
    for (int64_t j = 0; j < n; ++j) {
      double d = get(j, j);
      for (int64_t k = 0; k < j; ++k) d -= get(j, k) * get(j, k);
      if (!(d > 0)) return put_int(at, info, static_cast<int>(j + 1)) ? kSuccess : kExecutionFailed;
      d = std::sqrt(d);
      set(j, j, d);
      for (int64_t i = j + 1; i < n; ++i) {
        double v = get(i, j);
        for (int64_t k = 0; k < j; ++k) v -= get(i, k) * get(j, k);
        set(i, j, v / d);
      }
    }
    return put_int(at, info, 0) ? kSuccess : kExecutionFailed;
  });
}
int potrs(int uplo, int64_t n, int64_t nrhs, const void* a, int64_t lda, int type, void* b, int64_t ldb, void* info) {
  if (n < 0 || nrhs < 0 || lda < std::max<int64_t>(1, n) || ldb < std::max<int64_t>(1, n) ||
      (uplo != kLower && uplo != kUpper))
    return kInvalidValue;
  return on_device([&](const FakeDeviceAt& at) {
    Mat A, B;
    if (!map(at, a, n, n, lda, type, &A) || !map(at, b, n, nrhs, ldb, type, &B)) return kExecutionFailed;
    auto L = [&](int64_t i, int64_t j) { return uplo == kLower ? A.get(i, j) : A.get(j, i); };
    for (int64_t c = 0; c < nrhs; ++c) {
      std::vector<double> x(n);
      for (int64_t i = 0; i < n; ++i) x[i] = B.get(i, c);
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < i; ++j) x[i] -= L(i, j) * x[j];
        x[i] /= L(i, i);
      }
      for (int64_t i = n - 1; i >= 0; --i) {
        for (int64_t j = i + 1; j < n; ++j) x[i] -= L(j, i) * x[j];
        x[i] /= L(i, i);
      }
      for (int64_t i = 0; i < n; ++i) B.set(i, c, x[i]);
    }
    return put_int(at, info, 0) ? kSuccess : kExecutionFailed;
  });
}

// ---- symmetric eigenvalues (cyclic Jacobi), ascending; eigenvectors into A when asked
// sort: eigenvalues ascending (else in the order the rotations leave them: syevj's sort_eig 0);
// sweeps: at most that many (syevj's max_sweeps).
int syevd(int jobz, int uplo, int64_t n, void* a, int64_t lda, int type, void* w, int wtype, void* info,
          bool sort = true, int sweeps = 100) {
  if (n < 0 || lda < std::max<int64_t>(1, n) || (jobz != 0 && jobz != 1) || (uplo != kLower && uplo != kUpper))
    return kInvalidValue;
  return on_device([&](const FakeDeviceAt& at) {
    Mat A, W;
    if (!map(at, a, n, n, lda, type, &A) || !map(at, w, n, 1, std::max<int64_t>(1, n), wtype, &W))
      return kExecutionFailed;
    std::vector<double> s(n * n), v(n * n, 0.0);
    for (int64_t i = 0; i < n; ++i) {
      v[i + i * n] = 1;
      for (int64_t j = 0; j < n; ++j) {
        const bool stored = uplo == kLower ? i >= j : i <= j;
        s[i + j * n] = stored ? A.get(i, j) : A.get(j, i);
      }
    }
    for (int sweep = 0; sweep < sweeps; ++sweep) {
      double off = 0;
      for (int64_t p = 0; p < n; ++p)
        for (int64_t q = p + 1; q < n; ++q) off += s[p + q * n] * s[p + q * n];
      if (off < 1e-30) break;
      for (int64_t p = 0; p < n; ++p)
        for (int64_t q = p + 1; q < n; ++q) {
          const double apq = s[p + q * n];
          if (apq == 0) continue;
          const double theta = (s[q + q * n] - s[p + p * n]) / (2 * apq);
          const double t = (theta >= 0 ? 1 : -1) / (std::fabs(theta) + std::sqrt(theta * theta + 1));
          const double c = 1 / std::sqrt(t * t + 1), sn = t * c;
          for (int64_t k = 0; k < n; ++k) {  // columns p, q
            const double kp = s[k + p * n], kq = s[k + q * n];
            s[k + p * n] = c * kp - sn * kq;
            s[k + q * n] = sn * kp + c * kq;
          }
          for (int64_t k = 0; k < n; ++k) {  // rows p, q
            const double pk = s[p + k * n], qk = s[q + k * n];
            s[p + k * n] = c * pk - sn * qk;
            s[q + k * n] = sn * pk + c * qk;
          }
          for (int64_t k = 0; k < n; ++k) {
            const double kp = v[k + p * n], kq = v[k + q * n];
            v[k + p * n] = c * kp - sn * kq;
            v[k + q * n] = sn * kp + c * kq;
          }
        }
    }
    std::vector<int64_t> order(n);
    for (int64_t i = 0; i < n; ++i) order[i] = i;
    if (sort)
      std::sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return s[x + x * n] < s[y + y * n]; });
    for (int64_t i = 0; i < n; ++i) {
      W.set(i, 0, s[order[i] + order[i] * n]);
      if (jobz == 1)
        for (int64_t k = 0; k < n; ++k) A.set(k, i, v[k + order[i] * n]);
    }
    return put_int(at, info, 0) ? kSuccess : kExecutionFailed;
  });
}

// ---- the legacy API (S: fp32, D: fp64). Work sizes are the fake's own.
template <int T>
int getrf_bs(void* h, int m, int n, void*, int lda, int* lwork) {
  if (!handle_ok(h)) return kNotInitialized;
  if (!lwork || m < 0 || n < 0 || lda < std::max(1, m)) return kInvalidValue;
  *lwork = std::max(1, n);
  return kSuccess;
}
template <int T>
int getrf_(void* h, int m, int n, void* a, int lda, void*, void* ipiv, void* info) {
  return handle_ok(h) ? getrf(m, n, a, lda, T, ipiv, false, info) : kNotInitialized;
}
template <int T>
int getrs_(void* h, int trans, int n, int nrhs, void* a, int lda, void* ipiv, void* b, int ldb, void* info) {
  return handle_ok(h) ? getrs(trans, n, nrhs, a, lda, T, ipiv, false, b, ldb, info) : kNotInitialized;
}
template <int T>
int potrf_bs(void* h, int uplo, int n, void*, int lda, int* lwork) {
  if (!handle_ok(h)) return kNotInitialized;
  if (!lwork || n < 0 || lda < std::max(1, n) || (uplo != kLower && uplo != kUpper)) return kInvalidValue;
  *lwork = std::max(1, n);
  return kSuccess;
}
template <int T>
int potrf_(void* h, int uplo, int n, void* a, int lda, void*, int, void* info) {
  return handle_ok(h) ? potrf(uplo, n, a, lda, T, info) : kNotInitialized;
}
template <int T>
int potrs_(void* h, int uplo, int n, int nrhs, void* a, int lda, void* b, int ldb, void* info) {
  return handle_ok(h) ? potrs(uplo, n, nrhs, a, lda, T, b, ldb, info) : kNotInitialized;
}
template <int T>
int syevd_bs(void* h, int jobz, int uplo, int n, void*, int lda, void*, int* lwork) {
  if (!handle_ok(h)) return kNotInitialized;
  if (!lwork || n < 0 || lda < std::max(1, n) || (jobz != 0 && jobz != 1) || (uplo != kLower && uplo != kUpper))
    return kInvalidValue;
  *lwork = std::max(1, 2 * n);
  return kSuccess;
}
template <int T>
int syevd_(void* h, int jobz, int uplo, int n, void* a, int lda, void* w, void*, int, void* info) {
  return handle_ok(h) ? syevd(jobz, uplo, n, a, lda, T, w, T, info) : kNotInitialized;
}

// syevj: syevd's Jacobi rotations, with the information object's sorting and sweeps.
template <int T>
int syevj_bs(void* h, int jobz, int uplo, int n, void* a, int lda, void* w, int* lwork, void* p) {
  {
    std::lock_guard l(g_mu);
    if (!live(p, 2)) return live(h, 0) ? kInvalidValue : kNotInitialized;
  }
  return syevd_bs<T>(h, jobz, uplo, n, a, lda, w, lwork);
}
template <int T>
int syevj_(void* h, int jobz, int uplo, int n, void* a, int lda, void* w, void*, int, void* info, void* p) {
  if (!handle_ok(h)) return kNotInitialized;
  Object o;
  {
    std::lock_guard l(g_mu);
    if (!live(p, 2)) return kInvalidValue;
    o = *static_cast<Object*>(p);
  }
  return syevd(jobz, uplo, n, a, lda, T, w, T, info, o.sort != 0, o.max_sweeps);
}

// ---- the 64-bit generic API: the data type must be the compute type (the fake's limit)
bool types_ok(int data, int compute) { return (data == kR32F || data == kR64F) && data == compute; }
int x_getrf_bs(void* h, void* p, int64_t m, int64_t n, int dt, const void*, int64_t lda, int ct, size_t* dev,
               size_t* host) {
  if (!handle_ok(h)) return kNotInitialized;
  if (!params_ok(p) || !dev || !host || m < 0 || n < 0 || lda < std::max<int64_t>(1, m)) return kInvalidValue;
  if (!types_ok(dt, ct)) return kNotSupported;
  *dev = 8 * std::max<int64_t>(1, n), *host = 16;  // a host work area too, as some of NVIDIA's forms ask
  return kSuccess;
}
int x_getrf(void* h, void* p, int64_t m, int64_t n, int dt, void* a, int64_t lda, void* ipiv, int ct, void*, size_t,
            void* host, size_t host_bytes, void* info) {
  if (!handle_ok(h)) return kNotInitialized;
  if (!params_ok(p)) return kInvalidValue;
  if (!types_ok(dt, ct)) return kNotSupported;
  if (host_bytes && !host) return kInvalidValue;
  if (host) std::memset(host, 0, host_bytes);  // the host work area must be writable host memory
  return getrf(m, n, a, lda, dt, ipiv, true, info);
}
int x_getrs(void* h, void* p, int trans, int64_t n, int64_t nrhs, int dta, const void* a, int64_t lda,
            const void* ipiv, int dtb, void* b, int64_t ldb, void* info) {
  if (!handle_ok(h)) return kNotInitialized;
  if (!params_ok(p)) return kInvalidValue;
  if (!types_ok(dta, dtb)) return kNotSupported;
  return getrs(trans, n, nrhs, a, lda, dta, ipiv, true, b, ldb, info);
}
int x_potrf_bs(void* h, void* p, int uplo, int64_t n, int dt, const void*, int64_t lda, int ct, size_t* dev,
               size_t* host) {
  if (!handle_ok(h)) return kNotInitialized;
  if (!params_ok(p) || !dev || !host || n < 0 || lda < std::max<int64_t>(1, n) || (uplo != kLower && uplo != kUpper))
    return kInvalidValue;
  if (!types_ok(dt, ct)) return kNotSupported;
  *dev = 8 * std::max<int64_t>(1, n), *host = 0;
  return kSuccess;
}
int x_potrf(void* h, void* p, int uplo, int64_t n, int dt, void* a, int64_t lda, int ct, void*, size_t, void*, size_t,
            void* info) {
  if (!handle_ok(h)) return kNotInitialized;
  if (!params_ok(p)) return kInvalidValue;
  if (!types_ok(dt, ct)) return kNotSupported;
  return potrf(uplo, n, a, lda, dt, info);
}
int x_potrs(void* h, void* p, int uplo, int64_t n, int64_t nrhs, int dta, const void* a, int64_t lda, int dtb,
            void* b, int64_t ldb, void* info) {
  if (!handle_ok(h)) return kNotInitialized;
  if (!params_ok(p)) return kInvalidValue;
  if (!types_ok(dta, dtb)) return kNotSupported;
  return potrs(uplo, n, nrhs, a, lda, dta, b, ldb, info);
}

}  // namespace

void* fake_cusolver_symbol(const char* name) {
  static const std::map<std::string, void*> t = {
      {"cusolverDnCreate", reinterpret_cast<void*>(f_create)},
      {"cusolverDnDestroy", reinterpret_cast<void*>(f_destroy)},
      {"cusolverDnSetStream", reinterpret_cast<void*>(f_set_stream)},
      {"cusolverDnCreateParams", reinterpret_cast<void*>(f_create_params)},
      {"cusolverDnDestroyParams", reinterpret_cast<void*>(f_destroy_params)},
      {"cusolverDnSetAdvOptions", reinterpret_cast<void*>(f_set_adv_options)},
      {"cusolverDnCreateSyevjInfo", reinterpret_cast<void*>(f_create_syevj_info)},
      {"cusolverDnDestroySyevjInfo", reinterpret_cast<void*>(f_destroy_syevj_info)},
      {"cusolverDnXsyevjSetTolerance", reinterpret_cast<void*>(f_info_tolerance<2>)},
      {"cusolverDnXsyevjSetMaxSweeps", reinterpret_cast<void*>(f_info_sweeps<2>)},
      {"cusolverDnXsyevjSetSortEig", reinterpret_cast<void*>(f_info_sort<2>)},
      {"cusolverDnSsyevj_bufferSize", reinterpret_cast<void*>(syevj_bs<kR32F>)},
      {"cusolverDnDsyevj_bufferSize", reinterpret_cast<void*>(syevj_bs<kR64F>)},
      {"cusolverDnSsyevj", reinterpret_cast<void*>(syevj_<kR32F>)},
      {"cusolverDnDsyevj", reinterpret_cast<void*>(syevj_<kR64F>)},
      {"cusolverDnCreateGesvdjInfo", reinterpret_cast<void*>(f_create_gesvdj_info)},
      {"cusolverDnDestroyGesvdjInfo", reinterpret_cast<void*>(f_destroy_gesvdj_info)},
      {"cusolverDnXgesvdjSetTolerance", reinterpret_cast<void*>(f_info_tolerance<3>)},
      {"cusolverDnXgesvdjSetMaxSweeps", reinterpret_cast<void*>(f_info_sweeps<3>)},
      {"cusolverDnXgesvdjSetSortEig", reinterpret_cast<void*>(f_info_sort<3>)},
      {"cusolverDnSgetrf_bufferSize", reinterpret_cast<void*>(getrf_bs<kR32F>)},
      {"cusolverDnDgetrf_bufferSize", reinterpret_cast<void*>(getrf_bs<kR64F>)},
      {"cusolverDnSgetrf", reinterpret_cast<void*>(getrf_<kR32F>)},
      {"cusolverDnDgetrf", reinterpret_cast<void*>(getrf_<kR64F>)},
      {"cusolverDnSgetrs", reinterpret_cast<void*>(getrs_<kR32F>)},
      {"cusolverDnDgetrs", reinterpret_cast<void*>(getrs_<kR64F>)},
      {"cusolverDnSpotrf_bufferSize", reinterpret_cast<void*>(potrf_bs<kR32F>)},
      {"cusolverDnDpotrf_bufferSize", reinterpret_cast<void*>(potrf_bs<kR64F>)},
      {"cusolverDnSpotrf", reinterpret_cast<void*>(potrf_<kR32F>)},
      {"cusolverDnDpotrf", reinterpret_cast<void*>(potrf_<kR64F>)},
      {"cusolverDnSpotrs", reinterpret_cast<void*>(potrs_<kR32F>)},
      {"cusolverDnDpotrs", reinterpret_cast<void*>(potrs_<kR64F>)},
      {"cusolverDnSsyevd_bufferSize", reinterpret_cast<void*>(syevd_bs<kR32F>)},
      {"cusolverDnDsyevd_bufferSize", reinterpret_cast<void*>(syevd_bs<kR64F>)},
      {"cusolverDnSsyevd", reinterpret_cast<void*>(syevd_<kR32F>)},
      {"cusolverDnDsyevd", reinterpret_cast<void*>(syevd_<kR64F>)},
      {"cusolverDnXgetrf_bufferSize", reinterpret_cast<void*>(x_getrf_bs)},
      {"cusolverDnXgetrf", reinterpret_cast<void*>(x_getrf)},
      {"cusolverDnXgetrs", reinterpret_cast<void*>(x_getrs)},
      {"cusolverDnXpotrf_bufferSize", reinterpret_cast<void*>(x_potrf_bs)},
      {"cusolverDnXpotrf", reinterpret_cast<void*>(x_potrf)},
      {"cusolverDnXpotrs", reinterpret_cast<void*>(x_potrs)},
  };
  auto it = t.find(name);
  return it == t.end() ? nullptr : it->second;
}

uint64_t fake_live_cusolver_objects() {
  std::lock_guard l(g_mu);
  return g_live.size();
}

}  // namespace vmcuda::testing
