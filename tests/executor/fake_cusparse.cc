// A fake libcusparse.so.12 for the test executor (fake_driver.h): handles (stream, pointer mode,
// version), the generic API's CSR/COO sparse matrices and dense vectors/matrices (the getters and
// setters vmcuda remotes) and SpMV/SpMM, SpSV (CSR triangular solve, after an analysis) and
// SpGEMM (CSR x CSR, the product kept in its descriptor from compute to copy) computed on the
// CPU over the fake device memory for fp32 and fp64 values with 32- or 64-bit indices, and of the
// legacy API: matrix descriptors, csrilu02/csric02 (ILU(0), IC(0), zero pivots, numeric boost),
// gtsv2 (tridiagonal solves), COO/CSR sorts and index conversions, csr2cscEx2 (fp32/fp64, 32-bit
// indices); of every value type (S/D/C/Z): csrilu02/csric02 of complex values, bsrilu02, CSC
// sort, ?nnz, csrgeam2, gtsv2 of complex values, the interleaved gtsv/gpsv batches, csrcolor (a
// greedy coloring), BSR products and solves (bsrmv, bsrxmv, bsrmm, bsrsv2, bsrsm2, bsric02),
// and pruning to CSR (fp16/fp32/fp64). A FAKE: only what the tests need; other entry
// points are missing (the stub answers CUSPARSE_STATUS_NOT_SUPPORTED). Memory no allocation holds
// is CUSPARSE_STATUS_EXECUTION_FAILED (a GPU would fault).
#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <climits>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "executor/fake_driver.h"

namespace vmcuda::testing {
namespace {

constexpr int kSuccess = 0, kNotInitialized = 1, kInvalidValue = 3, kExecutionFailed = 6, kNotSupported = 10;
constexpr int kR32F = 0, kR64F = 1, kIdx32 = 2, kIdx64 = 3, kCsr = 1, kCoo = 3, kOrderCol = 1, kOrderRow = 2;

struct Entry {
  int64_t r, c;
  double v;
};

struct Object {
  int kind = 0;  // 0 handle, 1 sparse matrix, 2 dense vector, 3 dense matrix, 5 SpSV, 6 SpGEMM
  // handle
  void* stream = nullptr;
  int pointer_mode = 0;
  // sparse matrix
  int format = 0, index_type = 0, base = 0;
  int64_t rows = 0, cols = 0, nnz = 0;
  void *offsets = nullptr, *indices = nullptr, *rowind = nullptr;  // CSR: offsets+indices; COO: rowind+indices
  // dense vector / matrix (and the sparse matrix's values)
  int64_t size = 0, ld = 0;
  int order = 0;
  void* values = nullptr;
  int value_type = 0;
  // sparse matrix attributes (cusparseSpMatSetAttribute): fill mode (0 lower, 1 upper), diag
  // type (0 non-unit, 1 unit)
  int fill = 0, diag = 0;
  // SpSV: analysed (for which matrix); SpGEMM: work estimated, the product computed (kept here
  // as the library keeps it in its descriptor and buffers, until copied into C)
  bool analysed = false, estimated = false, computed = false;
  void* analysed_for = nullptr;
  std::vector<Entry> product;
  // legacy matrix descriptor (kind 20): matrix type (fill, diag, base above)
  int mat_type = 0;
  // csrilu02 / csric02 / bsrilu02 info (kinds 7, 8, 9): the first zero pivot the analysis
  // (structural) or the factorization (numerical) found (-1: none), the numeric boost
  int64_t zero_pivot = -1;
  // bsrsm2 info (kind 13): the right-hand sides its bufferSize was asked for (0 on a new info);
  // NVIDIA's analysis refuses more (libcusparse 12.6: bufferSize writes n into the info)
  int rhs = 0;
  bool boost = false;
  double tol = 0, boost_val = 0;
  std::complex<double> boost_value;  // the boost value of the generic (every type's) factorizations
};
std::mutex g_mu;
std::set<Object*> g_live;

Object* live(void* p, int kind) {
  auto* o = static_cast<Object*>(p);
  return g_live.count(o) && o->kind == kind ? o : nullptr;
}
int make(void** out, Object o) {
  if (!out) return kInvalidValue;
  std::lock_guard l(g_mu);
  auto* p = new Object(o);
  g_live.insert(p);
  *out = p;
  return kSuccess;
}
int destroy(void* p, int kind) {
  std::lock_guard l(g_mu);
  Object* o = live(p, kind);
  if (!o) return kind == 0 ? kNotInitialized : kInvalidValue;
  g_live.erase(o);
  delete o;
  return kSuccess;
}
template <class F>
int with(void* p, int kind, F f) {
  std::lock_guard l(g_mu);
  Object* o = live(p, kind);
  return o ? f(*o) : (kind == 0 ? kNotInitialized : kInvalidValue);
}

int f_create(void** h) { return make(h, Object{}); }
int f_destroy(void* h) { return destroy(h, 0); }
int f_set_stream(void* h, void* s) { return with(h, 0, [&](Object& o) { return o.stream = s, kSuccess; }); }
int f_get_version(void* h, int* v) {
  return with(h, 0, [&](Object&) { return v ? (*v = 12603, kSuccess) : kInvalidValue; });
}
int f_set_pointer_mode(void* h, int m) {
  return with(h, 0, [&](Object& o) { return m == 0 || m == 1 ? (o.pointer_mode = m, kSuccess) : kInvalidValue; });
}

bool value_ok(int t) { return t == kR32F || t == kR64F; }
bool index_ok(int t) { return t == kIdx32 || t == kIdx64; }

int sparse(void** out, int format, int64_t rows, int64_t cols, int64_t nnz, void* a, void* b, void* values,
           int offsets_type, int index_type, int base, int value_type) {
  if (rows < 0 || cols < 0 || nnz < 0 || !value_ok(value_type) || !index_ok(index_type) ||
      (format == kCsr && offsets_type != index_type) || (base != 0 && base != 1))
    return kInvalidValue;
  Object o;
  o.kind = 1;
  o.format = format;
  o.rows = rows, o.cols = cols, o.nnz = nnz;
  (format == kCsr ? o.offsets : o.rowind) = a;
  o.indices = b;
  o.values = values;
  o.index_type = index_type;
  o.base = base;
  o.value_type = value_type;
  return make(out, o);
}
int f_create_csr(void** out, int64_t r, int64_t c, int64_t nnz, void* off, void* ind, void* val, int ot, int it,
                 int base, int vt) {
  return sparse(out, kCsr, r, c, nnz, off, ind, val, ot, it, base, vt);
}
int f_create_coo(void** out, int64_t r, int64_t c, int64_t nnz, void* row, void* col, void* val, int it, int base,
                 int vt) {
  return sparse(out, kCoo, r, c, nnz, row, col, val, it, it, base, vt);
}
int f_create_dnvec(void** out, int64_t size, void* values, int vt) {
  if (size < 0 || !value_ok(vt)) return kInvalidValue;
  Object o;
  o.kind = 2;
  o.size = size;
  o.values = values;
  o.value_type = vt;
  return make(out, o);
}
int f_create_dnmat(void** out, int64_t rows, int64_t cols, int64_t ld, void* values, int vt, int order) {
  if (rows < 0 || cols < 0 || !value_ok(vt) || (order != kOrderCol && order != kOrderRow) ||
      ld < (order == kOrderCol ? rows : cols))
    return kInvalidValue;
  Object o;
  o.kind = 3;
  o.rows = rows, o.cols = cols, o.ld = ld;
  o.values = values;
  o.value_type = vt;
  o.order = order;
  return make(out, o);
}
int f_destroy_spmat(void* p) { return destroy(p, 1); }
int f_destroy_dnvec(void* p) { return destroy(p, 2); }
int f_destroy_dnmat(void* p) { return destroy(p, 3); }
int f_csr_set_pointers(void* p, void* off, void* ind, void* val) {
  return with(p, 1, [&](Object& o) {
    if (o.format != kCsr) return kInvalidValue;
    o.offsets = off, o.indices = ind, o.values = val;
    return kSuccess;
  });
}
int f_spmat_get_size(void* p, int64_t* r, int64_t* c, int64_t* nnz) {
  return with(p, 1, [&](Object& o) {
    if (!r || !c || !nnz) return kInvalidValue;
    *r = o.rows, *c = o.cols, *nnz = o.nnz;
    return kSuccess;
  });
}
int f_spmat_get_format(void* p, int* f) {
  return with(p, 1, [&](Object& o) { return f ? (*f = o.format, kSuccess) : kInvalidValue; });
}
int f_dnvec_get(void* p, int64_t* size, void** values, int* vt) {
  return with(p, 2, [&](Object& o) {
    if (!size || !values || !vt) return kInvalidValue;
    *size = o.size, *values = o.values, *vt = o.value_type;
    return kSuccess;
  });
}
int f_dnvec_get_values(void* p, void** values) {
  return with(p, 2, [&](Object& o) { return values ? (*values = o.values, kSuccess) : kInvalidValue; });
}
int f_dnvec_set_values(void* p, void* values) {
  return with(p, 2, [&](Object& o) { return o.values = values, kSuccess; });
}
int f_dnmat_get_values(void* p, void** values) {
  return with(p, 3, [&](Object& o) { return values ? (*values = o.values, kSuccess) : kInvalidValue; });
}

double load(const std::byte* p, int64_t i, int type) {
  if (type == kR32F) {
    float f;
    std::memcpy(&f, p + 4 * i, 4);
    return f;
  }
  double d;
  std::memcpy(&d, p + 8 * i, 8);
  return d;
}
void store(std::byte* p, int64_t i, int type, double v) {
  if (type == kR32F) {
    const float f = static_cast<float>(v);
    std::memcpy(p + 4 * i, &f, 4);
  } else {
    std::memcpy(p + 8 * i, &v, 8);
  }
}
size_t vbytes(int t) { return t == kR32F ? 4 : 8; }
size_t ibytes(int t) { return t == kIdx32 ? 4 : 8; }
int64_t index_at(const std::byte* p, int64_t i, int t) {
  if (t == kIdx32) {
    int32_t v;
    std::memcpy(&v, p + 4 * i, 4);
    return v;
  }
  int64_t v;
  std::memcpy(&v, p + 8 * i, 8);
  return v;
}

// The (row, column, value) entries of a sparse matrix in the fake device memory; false when its
// memory is not there or an index is out of range.
bool entries(const Object& a, const FakeDeviceAt& at, std::vector<Entry>* out) {
  const std::byte* val = at(reinterpret_cast<uint64_t>(a.values), a.nnz * vbytes(a.value_type));
  const std::byte* ind = at(reinterpret_cast<uint64_t>(a.indices), a.nnz * ibytes(a.index_type));
  if (a.nnz && (!val || !ind)) return false;
  if (a.format == kCsr) {
    const std::byte* off = at(reinterpret_cast<uint64_t>(a.offsets), (a.rows + 1) * ibytes(a.index_type));
    if (!off) return false;
    for (int64_t r = 0; r < a.rows; ++r) {
      const int64_t b = index_at(off, r, a.index_type) - a.base, e = index_at(off, r + 1, a.index_type) - a.base;
      if (b < 0 || e < b || e > a.nnz) return false;
      for (int64_t k = b; k < e; ++k) out->push_back({r, index_at(ind, k, a.index_type) - a.base, load(val, k, a.value_type)});
    }
  } else if (a.format == kCoo) {
    const std::byte* row = at(reinterpret_cast<uint64_t>(a.rowind), a.nnz * ibytes(a.index_type));
    if (a.nnz && !row) return false;
    for (int64_t k = 0; k < a.nnz; ++k)
      out->push_back({index_at(row, k, a.index_type) - a.base, index_at(ind, k, a.index_type) - a.base,
                      load(val, k, a.value_type)});
  } else {
    return false;
  }
  for (const Entry& e : *out)
    if (e.r < 0 || e.r >= a.rows || e.c < 0 || e.c >= a.cols) return false;
  return true;
}
// A scalar by the handle's pointer mode.
bool scalar(const Object& h, const void* p, int type, const FakeDeviceAt& at, double* v) {
  if (!p) return false;
  const std::byte* b = static_cast<const std::byte*>(p);
  if (h.pointer_mode == 1 && !(b = at(reinterpret_cast<uint64_t>(p), vbytes(type)))) return false;
  *v = load(b, 0, type);
  return true;
}

int f_spmv_buffer(void* h, int op, const void*, void* a, void* x, const void*, void* y, int ct, int, size_t* size) {
  std::lock_guard l(g_mu);
  if (!live(h, 0)) return kNotInitialized;
  if (!live(a, 1) || !live(x, 2) || !live(y, 2) || !size || op < 0 || op > 2 || !value_ok(ct)) return kInvalidValue;
  *size = 64;  // a fake's own choice
  return kSuccess;
}
int f_spmv(void* hp, int op, const void* alpha, void* ap, void* xp, const void* beta, void* yp, int ct, int, void*) {
  std::lock_guard l(g_mu);
  Object* h = live(hp, 0);
  if (!h) return kNotInitialized;
  Object *a = live(ap, 1), *x = live(xp, 2), *y = live(yp, 2);
  if (!a || !x || !y || op < 0 || op > 2 || !value_ok(ct)) return kInvalidValue;
  const bool t = op != 0;
  if (x->size != (t ? a->rows : a->cols) || y->size != (t ? a->cols : a->rows)) return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    double al, be;
    std::vector<Entry> es;
    const std::byte* xv = at(reinterpret_cast<uint64_t>(x->values), x->size * vbytes(x->value_type));
    std::byte* yv = at(reinterpret_cast<uint64_t>(y->values), y->size * vbytes(y->value_type));
    if (!scalar(*h, alpha, ct, at, &al) || !scalar(*h, beta, ct, at, &be)) {
      status = h->pointer_mode ? kExecutionFailed : kInvalidValue;
      return;
    }
    if ((x->size && !xv) || (y->size && !yv) || !entries(*a, at, &es)) {
      status = kExecutionFailed;
      return;
    }
    std::vector<double> acc(y->size, 0.0);
    for (const Entry& e : es) {
      if (t) acc[e.c] += e.v * load(xv, e.r, x->value_type);
      else acc[e.r] += e.v * load(xv, e.c, x->value_type);
    }
    for (int64_t i = 0; i < y->size; ++i)
      store(yv, i, y->value_type, al * acc[i] + (be == 0 ? 0 : be * load(yv, i, y->value_type)));
  });
  return status;
}

// Element (i, j) of a dense matrix's storage.
int64_t at_ij(const Object& m, int64_t i, int64_t j) { return m.order == kOrderCol ? i + j * m.ld : i * m.ld + j; }
int64_t span(const Object& m) {
  return m.rows && m.cols ? (m.order == kOrderCol ? (m.cols - 1) * m.ld + m.rows : (m.rows - 1) * m.ld + m.cols) : 0;
}

int f_spmm_buffer(void* h, int opA, int opB, const void*, void* a, void* b, const void*, void* c, int ct, int,
                  size_t* size) {
  std::lock_guard l(g_mu);
  if (!live(h, 0)) return kNotInitialized;
  if (!live(a, 1) || !live(b, 3) || !live(c, 3) || !size || opA < 0 || opA > 2 || opB < 0 || opB > 2 ||
      !value_ok(ct))
    return kInvalidValue;
  *size = 128;
  return kSuccess;
}
int f_spmm(void* hp, int opA, int opB, const void* alpha, void* ap, void* bp, const void* beta, void* cp, int ct,
           int, void*) {
  std::lock_guard l(g_mu);
  Object* h = live(hp, 0);
  if (!h) return kNotInitialized;
  Object *a = live(ap, 1), *b = live(bp, 3), *c = live(cp, 3);
  if (!a || !b || !c || !value_ok(ct)) return kInvalidValue;
  if (opB != 0) return kNotSupported;  // the fake: op(B) = B only
  const bool ta = opA != 0;
  const int64_t m = ta ? a->cols : a->rows, k = ta ? a->rows : a->cols, n = c->cols;
  if (c->rows != m || b->rows != k || b->cols != n) return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    double al, be;
    std::vector<Entry> es;
    const std::byte* bv = at(reinterpret_cast<uint64_t>(b->values), span(*b) * vbytes(b->value_type));
    std::byte* cv = at(reinterpret_cast<uint64_t>(c->values), span(*c) * vbytes(c->value_type));
    if (!scalar(*h, alpha, ct, at, &al) || !scalar(*h, beta, ct, at, &be)) {
      status = h->pointer_mode ? kExecutionFailed : kInvalidValue;
      return;
    }
    if ((span(*b) && !bv) || (span(*c) && !cv) || !entries(*a, at, &es)) {
      status = kExecutionFailed;
      return;
    }
    std::vector<double> acc(m * n, 0.0);
    for (const Entry& e : es) {
      const int64_t i = ta ? e.c : e.r, kk = ta ? e.r : e.c;
      for (int64_t j = 0; j < n; ++j) acc[i + j * m] += e.v * load(bv, at_ij(*b, kk, j), b->value_type);
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const int64_t p = at_ij(*c, i, j);
        store(cv, p, c->value_type, al * acc[i + j * m] + (be == 0 ? 0 : be * load(cv, p, c->value_type)));
      }
  });
  return status;
}

// ---- attributes, SpSV (triangular solve), SpGEMM (sparse x sparse), CSR only

int f_spmat_set_attribute(void* p, int attribute, void* data, size_t bytes) {
  return with(p, 1, [&](Object& o) {
    int v;
    if (!data || bytes != sizeof v || attribute < 0 || attribute > 1) return kInvalidValue;
    std::memcpy(&v, data, sizeof v);
    if (v != 0 && v != 1) return kInvalidValue;
    (attribute == 0 ? o.fill : o.diag) = v;
    return kSuccess;
  });
}
int f_spsv_create(void** out) {
  Object o;
  o.kind = 5;
  return make(out, o);
}
int f_spsv_destroy(void* p) { return destroy(p, 5); }
int f_spgemm_create(void** out) {
  Object o;
  o.kind = 6;
  return make(out, o);
}
int f_spgemm_destroy(void* p) { return destroy(p, 6); }

// op(A) square, CSR, x and y of its size.
bool spsv_args(Object* a, Object* x, Object* y, int op, int ct) {
  return a && x && y && op == 0 && value_ok(ct) && a->format == kCsr && a->rows == a->cols && x->size == a->rows &&
         y->size == a->rows;
}
int f_spsv_buffer(void* h, int op, const void*, void* a, void* x, void* y, int ct, int, void* d, size_t* size) {
  std::lock_guard l(g_mu);
  if (!live(h, 0)) return kNotInitialized;
  if (!spsv_args(live(a, 1), live(x, 2), live(y, 2), op, ct) || !live(d, 5) || !size) return kInvalidValue;
  *size = 256;
  return kSuccess;
}
// The analysis checks the structure (every row has its diagonal) and marks the buffer, as the
// library fills it; a solve needs both.
int f_spsv_analysis(void* hp, int op, const void*, void* ap, void* xp, void* yp, int ct, int, void* dp, void* buf) {
  std::lock_guard l(g_mu);
  if (!live(hp, 0)) return kNotInitialized;
  Object *a = live(ap, 1), *d = live(dp, 5);
  if (!spsv_args(a, live(xp, 2), live(yp, 2), op, ct) || !d || !buf) return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    std::vector<Entry> es;
    std::byte* mark = at(reinterpret_cast<uint64_t>(buf), 8);
    if (!mark || !entries(*a, at, &es)) {
      status = kExecutionFailed;
      return;
    }
    std::vector<bool> diagonal(a->rows, false);
    for (const Entry& e : es) diagonal[e.r] = diagonal[e.r] || e.r == e.c;
    for (int64_t r = 0; r < a->rows && a->diag == 0; ++r)
      if (!diagonal[r]) status = kInvalidValue;
    const uint64_t magic = 0x5350535641u;  // "SPSVA"
    std::memcpy(mark, &magic, 8);
  });
  if (status == kSuccess) {
    d->analysed = true;
    d->analysed_for = ap;
  }
  return status;
}
int f_spsv_solve(void* hp, int op, const void* alpha, void* ap, void* xp, void* yp, int ct, int, void* dp) {
  std::lock_guard l(g_mu);
  Object* h = live(hp, 0);
  if (!h) return kNotInitialized;
  Object *a = live(ap, 1), *x = live(xp, 2), *y = live(yp, 2), *d = live(dp, 5);
  if (!spsv_args(a, x, y, op, ct) || !d) return kInvalidValue;
  if (!d->analysed || d->analysed_for != ap) return kInvalidValue;  // no analysis of this matrix
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    double al;
    std::vector<Entry> es;
    const std::byte* xv = at(reinterpret_cast<uint64_t>(x->values), x->size * vbytes(x->value_type));
    std::byte* yv = at(reinterpret_cast<uint64_t>(y->values), y->size * vbytes(y->value_type));
    if (!scalar(*h, alpha, ct, at, &al)) {
      status = h->pointer_mode ? kExecutionFailed : kInvalidValue;
      return;
    }
    if ((x->size && !xv) || (y->size && !yv) || !entries(*a, at, &es)) {
      status = kExecutionFailed;
      return;
    }
    // Forward (lower) or backward (upper) substitution over the triangle the fill mode names.
    const int64_t n = a->rows;
    std::vector<std::vector<Entry>> rows(n);
    for (const Entry& e : es)
      if (a->fill == 0 ? e.c <= e.r : e.c >= e.r) rows[e.r].push_back(e);
    std::vector<double> out(n, 0.0);
    for (int64_t k = 0; k < n; ++k) {
      const int64_t r = a->fill == 0 ? k : n - 1 - k;
      double sum = al * load(xv, r, x->value_type), diagonal = 1.0;
      for (const Entry& e : rows[r]) {
        if (e.c == r) diagonal = a->diag == 1 ? 1.0 : e.v;
        else sum -= e.v * out[e.c];
      }
      out[r] = sum / diagonal;
    }
    for (int64_t i = 0; i < n; ++i) store(yv, i, y->value_type, out[i]);
  });
  return status;
}

bool spgemm_args(Object* a, Object* b, Object* c, int opA, int opB, int ct) {
  return a && b && c && opA == 0 && opB == 0 && value_ok(ct) && a->format == kCsr && b->format == kCsr &&
         c->format == kCsr && a->cols == b->rows && c->rows == a->rows && c->cols == b->cols;
}
// A first call (no buffer) answers the size; the second fills the buffer (the fake: a mark).
int f_spgemm_estimate(void* hp, int opA, int opB, const void*, void* ap, void* bp, const void*, void* cp, int ct, int,
                      void* dp, size_t* size, void* buf) {
  std::lock_guard l(g_mu);
  if (!live(hp, 0)) return kNotInitialized;
  Object* d = live(dp, 6);
  if (!spgemm_args(live(ap, 1), live(bp, 1), live(cp, 1), opA, opB, ct) || !d || !size) return kInvalidValue;
  if (!buf) {
    *size = 96;
    return kSuccess;
  }
  if (*size < 96) return kInvalidValue;
  d->estimated = true;
  return kSuccess;
}
// The product, into the descriptor (the library keeps it in its buffers); C's size becomes its
// number of entries.
int f_spgemm_compute(void* hp, int opA, int opB, const void* alpha, void* ap, void* bp, const void*, void* cp, int ct,
                     int, void* dp, size_t* size, void* buf) {
  std::lock_guard l(g_mu);
  Object* h = live(hp, 0);
  if (!h) return kNotInitialized;
  Object *a = live(ap, 1), *b = live(bp, 1), *c = live(cp, 1), *d = live(dp, 6);
  if (!spgemm_args(a, b, c, opA, opB, ct) || !d || !size) return kInvalidValue;
  if (!d->estimated) return kInvalidValue;  // no work estimation first
  if (!buf) {
    *size = 160;
    return kSuccess;
  }
  if (*size < 160) return kInvalidValue;
  int status = kSuccess;
  std::map<std::pair<int64_t, int64_t>, double> sum;
  fake_device_access([&](const FakeDeviceAt& at) {
    double al;
    std::vector<Entry> ea, eb;
    if (!scalar(*h, alpha, ct, at, &al)) {
      status = h->pointer_mode ? kExecutionFailed : kInvalidValue;
      return;
    }
    if (!entries(*a, at, &ea) || !entries(*b, at, &eb)) {
      status = kExecutionFailed;
      return;
    }
    std::vector<std::vector<Entry>> brows(b->rows);
    for (const Entry& e : eb) brows[e.r].push_back(e);
    for (const Entry& x : ea)
      for (const Entry& y : brows[x.c]) sum[{x.r, y.c}] += al * x.v * y.v;
  });
  if (status != kSuccess) return status;
  d->product.clear();
  for (const auto& [rc, v] : sum) d->product.push_back({rc.first, rc.second, v});
  d->computed = true;
  c->nnz = static_cast<int64_t>(d->product.size());
  return kSuccess;
}
int f_spgemm_copy(void* hp, int opA, int opB, const void*, void* ap, void* bp, const void*, void* cp, int ct, int,
                  void* dp) {
  std::lock_guard l(g_mu);
  if (!live(hp, 0)) return kNotInitialized;
  Object *c = live(cp, 1), *d = live(dp, 6);
  if (!spgemm_args(live(ap, 1), live(bp, 1), c, opA, opB, ct) || !d) return kInvalidValue;
  if (!d->computed || c->nnz != static_cast<int64_t>(d->product.size())) return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    const int64_t nnz = c->nnz;
    std::byte* off = at(reinterpret_cast<uint64_t>(c->offsets), (c->rows + 1) * ibytes(c->index_type));
    std::byte* ind = at(reinterpret_cast<uint64_t>(c->indices), nnz * ibytes(c->index_type));
    std::byte* val = at(reinterpret_cast<uint64_t>(c->values), nnz * vbytes(c->value_type));
    if (!off || (nnz && (!ind || !val))) {
      status = kExecutionFailed;
      return;
    }
    auto put_index = [&](std::byte* p, int64_t i, int64_t v) {
      if (c->index_type == kIdx32) {
        const int32_t w = static_cast<int32_t>(v);
        std::memcpy(p + 4 * i, &w, 4);
      } else {
        std::memcpy(p + 8 * i, &v, 8);
      }
    };
    int64_t k = 0;
    for (int64_t r = 0; r < c->rows; ++r) {
      put_index(off, r, k + c->base);
      for (; k < nnz && d->product[k].r == r; ++k) {
        put_index(ind, k, d->product[k].c + c->base);
        store(val, k, c->value_type, d->product[k].v);
      }
    }
    put_index(off, c->rows, nnz + c->base);
  });
  return status;
}

// ---- the legacy API: matrix descriptors, ILU(0)/IC(0) (csrilu02, csric02), tridiagonal solves
// (gtsv2), sorting and index conversions; fp32 and fp64, 32-bit indices (the legacy API's)

constexpr int kZeroPivot = 9, kMatDescr = 20, kIlu = 7, kIc = 8;

int f_create_mat_descr(void** out) {
  Object o;
  o.kind = kMatDescr;
  return make(out, o);
}
int f_destroy_mat_descr(void* p) { return destroy(p, kMatDescr); }
// A setter of one field: `value` one of `count` enumerators.
template <int Object::*Field, int Count>
int f_set_mat(void* p, int value) {
  return with(p, kMatDescr, [&](Object& o) {
    if (value < 0 || value >= Count) return kInvalidValue;
    o.*Field = value;
    return kSuccess;
  });
}
template <int Kind>
int f_create_info(void** out) {
  Object o;
  o.kind = Kind;
  return make(out, o);
}
template <int Kind>
int f_destroy_info(void* p) {
  return destroy(p, Kind);
}

int32_t int_at(const std::byte* p, int64_t i) {
  int32_t v;
  std::memcpy(&v, p + 4 * i, 4);
  return v;
}
void put_int(std::byte* p, int64_t i, int32_t v) { std::memcpy(p + 4 * i, &v, 4); }

// A square CSR matrix of the legacy API in the fake device memory: row offsets and column indices
// (zero-based here), each row's entries by column; false when its memory is not there or an
// index is out of range.
struct LegacyCsr {
  int64_t m = 0;
  std::vector<int64_t> off, col;
  bool read(const FakeDeviceAt& at, int64_t rows, int64_t nnz, const void* row_ptr, const void* col_ind, int base) {
    m = rows;
    const std::byte* o = at(reinterpret_cast<uint64_t>(row_ptr), (rows + 1) * 4);
    const std::byte* c = at(reinterpret_cast<uint64_t>(col_ind), nnz * 4);
    if (!o || (nnz && !c)) return false;
    off.resize(rows + 1);
    col.resize(nnz);
    for (int64_t r = 0; r <= rows; ++r) off[r] = int_at(o, r) - base;
    for (int64_t k = 0; k < nnz; ++k) col[k] = int_at(c, k) - base;
    if (off[0] != 0 || off[rows] != nnz) return false;
    for (int64_t r = 0; r < rows; ++r) {
      if (off[r + 1] < off[r]) return false;
      for (int64_t k = off[r]; k < off[r + 1]; ++k)
        if (col[k] < 0 || col[k] >= rows || (k > off[r] && col[k] <= col[k - 1])) return false;  // sorted, unique
    }
    return true;
  }
  int64_t find(int64_t r, int64_t c) const {
    for (int64_t k = off[r]; k < off[r + 1]; ++k)
      if (col[k] == c) return k;
    return -1;
  }
};

// The arguments every csrilu02/csric02 call checks: handle, a general matrix descriptor, the info.
int factor_args(void* hp, void* dp, void* ip, int kind, int m, int nnz, Object** h, Object** d, Object** info) {
  *h = live(hp, 0);
  if (!*h) return kNotInitialized;
  *d = live(dp, kMatDescr);
  *info = live(ip, kind);
  if (!*d || !*info || m < 0 || nnz < 0 || (*d)->mat_type != 0) return kInvalidValue;
  return kSuccess;
}
template <int Kind>
int f_factor_buffer(void* hp, int m, int nnz, void* dp, void*, void*, void*, void* ip, int* size) {
  std::lock_guard l(g_mu);
  Object *h, *d, *info;
  if (int s = factor_args(hp, dp, ip, Kind, m, nnz, &h, &d, &info)) return s;
  if (!size) return kInvalidValue;
  *size = 512;  // a fake's own choice
  return kSuccess;
}
// The analysis: the structure (each row's diagonal: its absence is a structural zero pivot); it
// marks the buffer, as the library fills it.
template <int Kind>
int f_factor_analysis(void* hp, int m, int nnz, void* dp, void*, void* rows, void* cols, void* ip, int, void* buf) {
  std::lock_guard l(g_mu);
  Object *h, *d, *info;
  if (int s = factor_args(hp, dp, ip, Kind, m, nnz, &h, &d, &info)) return s;
  if (!buf) return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    LegacyCsr a;
    std::byte* mark = at(reinterpret_cast<uint64_t>(buf), 8);
    if (!mark || !a.read(at, m, nnz, rows, cols, d->base)) {
      status = kExecutionFailed;
      return;
    }
    info->zero_pivot = -1;
    for (int64_t r = 0; r < m && info->zero_pivot < 0; ++r)
      if (a.find(r, r) < 0) info->zero_pivot = r;
    const uint64_t magic = Kind == kIlu ? 0x494c5530u : 0x49433030u;  // "ILU0", "IC00"
    std::memcpy(mark, &magic, 8);
  });
  if (status == kSuccess) info->analysed = true;
  return status;
}
// ILU(0) (Kind kIlu: L unit lower and U in A's pattern) or IC(0) (kIc: L in the lower triangle,
// the upper part left as it is), in place; a zero diagonal is a numerical zero pivot (or, with
// the numeric boost, a diagonal at most tol in size becomes boost_val).
template <int Kind, int T>
int f_factor(void* hp, int m, int nnz, void* dp, void* vals, void* rows, void* cols, void* ip, int, void* buf) {
  std::lock_guard l(g_mu);
  Object *h, *d, *info;
  if (int s = factor_args(hp, dp, ip, Kind, m, nnz, &h, &d, &info)) return s;
  if (!buf || !info->analysed) return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    LegacyCsr a;
    std::byte* v = at(reinterpret_cast<uint64_t>(vals), nnz * vbytes(T));
    if ((nnz && !v) || !a.read(at, m, nnz, rows, cols, d->base)) {
      status = kExecutionFailed;
      return;
    }
    std::vector<double> x(nnz);
    for (int64_t k = 0; k < nnz; ++k) x[k] = load(v, k, T);
    auto pivot = [&](int64_t r, double& diag) {
      if (info->boost && std::abs(diag) <= info->tol) diag = info->boost_val;
      else if (diag == 0 && (info->zero_pivot < 0 || r < info->zero_pivot)) info->zero_pivot = r;
    };
    for (int64_t i = 0; i < m; ++i) {
      const int64_t di = a.find(i, i);
      if (di < 0) continue;  // the structural zero the analysis reported
      if (Kind == kIlu) {
        for (int64_t p = a.off[i]; p < a.off[i + 1] && a.col[p] < i; ++p) {
          const int64_t k = a.col[p], dk = a.find(k, k);
          if (dk < 0) continue;
          x[p] /= x[dk];
          for (int64_t q = p + 1; q < a.off[i + 1]; ++q) {
            const int64_t kj = a.find(k, a.col[q]);
            if (kj >= 0) x[q] -= x[p] * x[kj];
          }
        }
        pivot(i, x[di]);
      } else {
        for (int64_t p = a.off[i]; p < a.off[i + 1] && a.col[p] < i; ++p) {
          const int64_t k = a.col[p], dk = a.find(k, k);
          double sum = x[p];
          for (int64_t q = a.off[i]; q < p; ++q) {
            const int64_t kj = a.find(k, a.col[q]);
            if (kj >= 0) sum -= x[q] * x[kj];
          }
          x[p] = dk >= 0 && x[dk] != 0 ? sum / x[dk] : sum;
        }
        double diag = x[di];
        for (int64_t q = a.off[i]; q < di; ++q) diag -= x[q] * x[q];
        pivot(i, diag);
        x[di] = diag > 0 ? std::sqrt(diag) : diag;
      }
    }
    for (int64_t k = 0; k < nnz; ++k) store(v, k, T, x[k]);
  });
  return status;
}
// The first zero pivot: host or device memory by the pointer mode; CUSPARSE_STATUS_ZERO_PIVOT with it.
template <int Kind>
int f_zero_pivot(void* hp, void* ip, int* position) {
  std::lock_guard l(g_mu);
  Object* h = live(hp, 0);
  if (!h) return kNotInitialized;
  Object* info = live(ip, Kind);
  if (!info || !position) return kInvalidValue;
  const int32_t z = static_cast<int32_t>(info->zero_pivot);
  if (h->pointer_mode == 1) {
    int status = kSuccess;
    fake_device_access([&](const FakeDeviceAt& at) {
      std::byte* p = at(reinterpret_cast<uint64_t>(position), 4);
      if (!p) status = kExecutionFailed;
      else put_int(p, 0, z);
    });
    if (status != kSuccess) return status;
  } else {
    *position = z;
  }
  return z >= 0 ? kZeroPivot : kSuccess;
}
template <int T>
int f_ilu_boost(void* hp, void* ip, int enable, const void* tol, const void* boost_val) {
  std::lock_guard l(g_mu);
  Object* h = live(hp, 0);
  if (!h) return kNotInitialized;
  Object* info = live(ip, kIlu);
  if (!info) return kInvalidValue;
  info->boost = enable != 0;
  if (!info->boost) return kSuccess;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    if (!scalar(*h, tol, kR64F, at, &info->tol) || !scalar(*h, boost_val, T, at, &info->boost_val))
      status = h->pointer_mode ? kExecutionFailed : kInvalidValue;
  });
  return status;
}

// ---- tridiagonal solves: B (m x n, leading dimension ldb) overwritten by the solution; the
// fake eliminates without pivoting (its tests' matrices are diagonally dominant)
bool thomas(const FakeDeviceAt& at, int T, int64_t m, const void* dl, const void* d, const void* du, void* x,
            int64_t first, int64_t n, int64_t ldb) {
  const size_t e = vbytes(T);
  const std::byte *l = at(reinterpret_cast<uint64_t>(dl), (first + m) * e),
                  *c = at(reinterpret_cast<uint64_t>(d), (first + m) * e),
                  *u = at(reinterpret_cast<uint64_t>(du), (first + m) * e);
  std::byte* b = at(reinterpret_cast<uint64_t>(x), (first + (n - 1) * ldb + m) * e);
  if (!l || !c || !u || !b) return false;
  for (int64_t j = 0; j < n; ++j) {
    const int64_t o = first + j * ldb;
    std::vector<double> cp(m), dp(m);
    for (int64_t i = 0; i < m; ++i) {
      const double a = i ? load(l, first + i, T) : 0, den = load(c, first + i, T) - (i ? a * cp[i - 1] : 0);
      cp[i] = load(u, first + i, T) / den;
      dp[i] = (load(b, o + i, T) - (i ? a * dp[i - 1] : 0)) / den;
    }
    for (int64_t i = m - 1; i >= 0; --i) {
      if (i < m - 1) dp[i] -= cp[i] * dp[i + 1];
      store(b, o + i, T, dp[i]);
    }
  }
  return true;
}
int f_gtsv_buffer(void* hp, int m, int n, const void*, const void*, const void*, const void*, int ldb, size_t* size) {
  std::lock_guard l(g_mu);
  if (!live(hp, 0)) return kNotInitialized;
  if (m < 3 || n < 0 || ldb < m || !size) return kInvalidValue;
  *size = 64 + 8 * static_cast<size_t>(m);
  return kSuccess;
}
template <int T>
int f_gtsv(void* hp, int m, int n, const void* dl, const void* d, const void* du, void* b, int ldb, void* buf) {
  std::lock_guard l(g_mu);
  if (!live(hp, 0)) return kNotInitialized;
  if (m < 3 || n < 0 || ldb < m || !buf) return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    if (n && !thomas(at, T, m, dl, d, du, b, 0, n, ldb)) status = kExecutionFailed;
  });
  return status;
}
int f_gtsv_batch_buffer(void* hp, int m, const void*, const void*, const void*, const void*, int batch, int stride,
                        size_t* size) {
  std::lock_guard l(g_mu);
  if (!live(hp, 0)) return kNotInitialized;
  if (m < 3 || batch < 0 || stride < m || !size) return kInvalidValue;
  *size = 64 + 8 * static_cast<size_t>(m);
  return kSuccess;
}
template <int T>
int f_gtsv_batch(void* hp, int m, const void* dl, const void* d, const void* du, void* x, int batch, int stride,
                 void* buf) {
  std::lock_guard l(g_mu);
  if (!live(hp, 0)) return kNotInitialized;
  if (m < 3 || batch < 0 || stride < m || !buf) return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    for (int64_t i = 0; i < batch && status == kSuccess; ++i)
      if (!thomas(at, T, m, dl, d, du, x, i * stride, 1, m)) status = kExecutionFailed;
  });
  return status;
}

// ---- sorting and index conversions (32-bit indices)
int f_sort_buffer(void* hp, int m, int n, int nnz, const void*, const void*, size_t* size) {
  std::lock_guard l(g_mu);
  if (!live(hp, 0)) return kNotInitialized;
  if (m < 0 || n < 0 || nnz < 0 || !size) return kInvalidValue;
  *size = 64 + 8 * static_cast<size_t>(nnz);
  return kSuccess;
}
// Sorts entries [b, e) of keys (major, minor) in place, P with them (P[i] = P[old i]).
void sort_range(std::byte* major, std::byte* minor, std::byte* perm, int64_t b, int64_t e) {
  std::vector<int64_t> idx;
  for (int64_t k = b; k < e; ++k) idx.push_back(k);
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t x, int64_t y) {
    const int32_t mx = major ? int_at(major, x) : 0, my = major ? int_at(major, y) : 0;
    return mx != my ? mx < my : int_at(minor, x) < int_at(minor, y);
  });
  std::vector<int32_t> ma, mi, pe;
  for (int64_t k : idx) {
    if (major) ma.push_back(int_at(major, k));
    mi.push_back(int_at(minor, k));
    if (perm) pe.push_back(int_at(perm, k));
  }
  for (int64_t k = b; k < e; ++k) {
    if (major) put_int(major, k, ma[k - b]);
    put_int(minor, k, mi[k - b]);
    if (perm) put_int(perm, k, pe[k - b]);
  }
}
template <bool ByRow>
int f_coosort(void* hp, int m, int n, int nnz, void* rows, void* cols, void* perm, void* buf) {
  std::lock_guard l(g_mu);
  if (!live(hp, 0)) return kNotInitialized;
  if (m < 0 || n < 0 || nnz < 0 || !buf) return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    std::byte *r = at(reinterpret_cast<uint64_t>(rows), nnz * 4), *c = at(reinterpret_cast<uint64_t>(cols), nnz * 4),
              *p = perm ? at(reinterpret_cast<uint64_t>(perm), nnz * 4) : nullptr;
    if (nnz && (!r || !c || (perm && !p))) {
      status = kExecutionFailed;
      return;
    }
    if (ByRow) sort_range(r, c, p, 0, nnz);
    else sort_range(c, r, p, 0, nnz);
  });
  return status;
}
int f_csrsort(void* hp, int m, int n, int nnz, void* dp, const void* row_ptr, void* cols, void* perm, void* buf) {
  std::lock_guard l(g_mu);
  if (!live(hp, 0)) return kNotInitialized;
  Object* d = live(dp, kMatDescr);
  if (!d || m < 0 || n < 0 || nnz < 0 || !buf) return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    const std::byte* o = at(reinterpret_cast<uint64_t>(row_ptr), (m + 1) * 4);
    std::byte *c = at(reinterpret_cast<uint64_t>(cols), nnz * 4),
              *p = perm ? at(reinterpret_cast<uint64_t>(perm), nnz * 4) : nullptr;
    if (!o || (nnz && (!c || (perm && !p)))) {
      status = kExecutionFailed;
      return;
    }
    for (int64_t r = 0; r < m; ++r) {
      const int64_t b = int_at(o, r) - d->base, e = int_at(o, r + 1) - d->base;
      if (b < 0 || e < b || e > nnz) {
        status = kExecutionFailed;
        return;
      }
      sort_range(nullptr, c, p, b, e);
    }
  });
  return status;
}
int f_identity(void* hp, int n, void* perm) {
  std::lock_guard l(g_mu);
  if (!live(hp, 0)) return kNotInitialized;
  if (n < 0) return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    std::byte* p = at(reinterpret_cast<uint64_t>(perm), static_cast<size_t>(n) * 4);
    if (n && !p) status = kExecutionFailed;
    for (int32_t i = 0; i < n && p; ++i) put_int(p, i, i);
  });
  return status;
}
int f_coo2csr(void* hp, const void* coo_rows, int nnz, int m, void* row_ptr, int base) {
  std::lock_guard l(g_mu);
  if (!live(hp, 0)) return kNotInitialized;
  if (nnz < 0 || m < 0 || (base != 0 && base != 1)) return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    const std::byte* r = at(reinterpret_cast<uint64_t>(coo_rows), static_cast<size_t>(nnz) * 4);
    std::byte* o = at(reinterpret_cast<uint64_t>(row_ptr), static_cast<size_t>(m + 1) * 4);
    if ((nnz && !r) || !o) {
      status = kExecutionFailed;
      return;
    }
    std::vector<int32_t> count(m + 1, 0);
    for (int64_t k = 0; k < nnz; ++k) {
      const int64_t row = int_at(r, k) - base;
      if (row >= 0 && row < m) ++count[row + 1];
    }
    for (int64_t i = 0; i < m; ++i) count[i + 1] += count[i];
    for (int64_t i = 0; i <= m; ++i) put_int(o, i, count[i] + base);
  });
  return status;
}
int f_csr2coo(void* hp, const void* row_ptr, int nnz, int m, void* coo_rows, int base) {
  std::lock_guard l(g_mu);
  if (!live(hp, 0)) return kNotInitialized;
  if (nnz < 0 || m < 0 || (base != 0 && base != 1)) return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    const std::byte* o = at(reinterpret_cast<uint64_t>(row_ptr), static_cast<size_t>(m + 1) * 4);
    std::byte* r = at(reinterpret_cast<uint64_t>(coo_rows), static_cast<size_t>(nnz) * 4);
    if (!o || (nnz && !r)) {
      status = kExecutionFailed;
      return;
    }
    for (int32_t i = 0; i < m; ++i)
      for (int64_t k = std::max<int64_t>(0, int_at(o, i) - base); k < std::min<int64_t>(nnz, int_at(o, i + 1) - base); ++k)
        put_int(r, k, i + base);
  });
  return status;
}
int f_csr2csc_buffer(void* hp, int m, int n, int nnz, const void*, const void*, const void*, void*, void*, void*,
                     int vt, int action, int base, int alg, size_t* size) {
  std::lock_guard l(g_mu);
  if (!live(hp, 0)) return kNotInitialized;
  if (m < 0 || n < 0 || nnz < 0 || !value_ok(vt) || action < 0 || action > 1 || base < 0 || base > 1 || alg != 1 || !size)
    return kInvalidValue;
  *size = 128 + 4 * static_cast<size_t>(nnz);
  return kSuccess;
}
// The transpose's CSR (the CSC of A): within each column its rows in order; values when NUMERIC.
int f_csr2csc(void* hp, int m, int n, int nnz, const void* vals, const void* row_ptr, const void* cols, void* cvals,
              void* col_ptr, void* rows, int vt, int action, int base, int alg, void* buf) {
  std::lock_guard l(g_mu);
  if (!live(hp, 0)) return kNotInitialized;
  if (m < 0 || n < 0 || nnz < 0 || !value_ok(vt) || action < 0 || action > 1 || base < 0 || base > 1 || alg != 1 || !buf)
    return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    const size_t e = vbytes(vt);
    const std::byte *o = at(reinterpret_cast<uint64_t>(row_ptr), (m + 1) * 4ull),
                    *c = at(reinterpret_cast<uint64_t>(cols), nnz * 4ull),
                    *v = action ? at(reinterpret_cast<uint64_t>(vals), nnz * e) : nullptr;
    std::byte *co = at(reinterpret_cast<uint64_t>(col_ptr), (n + 1) * 4ull), *r = at(reinterpret_cast<uint64_t>(rows), nnz * 4ull),
              *cv = action ? at(reinterpret_cast<uint64_t>(cvals), nnz * e) : nullptr;
    if (!o || !co || (nnz && (!c || !r || (action && (!v || !cv))))) {
      status = kExecutionFailed;
      return;
    }
    std::vector<int32_t> start(n + 1, 0);
    for (int64_t k = 0; k < nnz; ++k) {
      const int64_t col = int_at(c, k) - base;
      if (col < 0 || col >= n) {
        status = kExecutionFailed;
        return;
      }
      ++start[col + 1];
    }
    for (int64_t j = 0; j < n; ++j) start[j + 1] += start[j];
    for (int64_t j = 0; j <= n; ++j) put_int(co, j, start[j] + base);
    for (int32_t i = 0; i < m; ++i)
      for (int64_t k = int_at(o, i) - base; k < int_at(o, i + 1) - base; ++k) {
        const int64_t at_k = start[int_at(c, k) - base]++;
        put_int(r, at_k, i + base);
        if (action) store(cv, at_k, vt, load(v, k, vt));
      }
  });
  return status;
}


// ---- the legacy API's BSR calls (bsrmv, bsrxmv, bsrmm; bsrsv2, bsrsm2 and bsric02 with their
// info objects) and pruning (pruneDense2csr, pruneCsr2csr, by threshold or percentage) for the
// four value types (V: float, double, complex float, complex double; pruning: fp16 as Half,
// fp32 and fp64).
// A BSR matrix is read as its scalar CSR (each block's elements, by the block's storage
// direction): the products and solves are then the scalar ones; block IC(0) on full blocks is
// the scalar IC(0) on their elements' pattern. A zero pivot's position is its block row.

constexpr int kBsrilu = 9, kBsric = 11, kBsrsv = 12, kBsrsm = 13, kPrune = 14;

template <class V>
V conj_of(V v) {
  if constexpr (std::is_floating_point_v<V>) return v;
  else return std::conj(v);
}
template <class V>
double magnitude(V v) { return std::abs(v); }
// __half's bits (IEEE binary16), read as a double: _Float16 is not on every compiler's x86-64.
struct Half {
  uint16_t bits;
  explicit operator double() const {
    const int exponent = (bits >> 10) & 0x1f, mantissa = bits & 0x3ff;
    const double v = exponent == 0    ? std::ldexp(mantissa, -24)
                     : exponent == 31 ? (mantissa ? NAN : INFINITY)
                                      : std::ldexp(mantissa + 1024, exponent - 25);
    return bits >> 15 ? -v : v;
  }
};
inline double magnitude(Half v) { return std::fabs(double(v)); }
template <class V>
V of_complex(std::complex<double> c) {
  if constexpr (std::is_floating_point_v<V>) return V(c.real());
  else return V(c);
}
template <class V>
bool read_values(const FakeDeviceAt& at, const void* p, int64_t n, std::vector<V>* out) {
  out->assign(static_cast<size_t>(std::max<int64_t>(n, 0)), V{});
  if (n <= 0) return true;
  const std::byte* b = at(reinterpret_cast<uint64_t>(p), n * sizeof(V));
  if (!b) return false;
  std::memcpy(out->data(), b, n * sizeof(V));
  return true;
}
template <class V>
bool write_values(const FakeDeviceAt& at, void* p, const std::vector<V>& v) {
  if (v.empty()) return true;
  std::byte* b = at(reinterpret_cast<uint64_t>(p), v.size() * sizeof(V));
  if (!b) return false;
  std::memcpy(b, v.data(), v.size() * sizeof(V));
  return true;
}
// A typed scalar by the handle's pointer mode.
template <class V>
bool scalar_of(const Object& h, const void* p, const FakeDeviceAt& at, V* v) {
  if (!p) return false;
  const std::byte* b = static_cast<const std::byte*>(p);
  if (h.pointer_mode == 1 && !(b = at(reinterpret_cast<uint64_t>(p), sizeof(V)))) return false;
  std::memcpy(v, b, sizeof(V));
  return true;
}
// An int output by the handle's pointer mode (an nnz total).
bool put_mode_int(const Object& h, int* p, int v, const FakeDeviceAt& at) {
  if (h.pointer_mode != 1) return *p = v, true;
  std::byte* b = at(reinterpret_cast<uint64_t>(p), 4);
  if (!b) return false;
  put_int(b, 0, v);
  return true;
}

// A BSR matrix's scalar CSR: row r's entries (column, position of the value in the BSR values).
struct BsrRows {
  int64_t rows = 0, cols = 0, bd = 0;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> row;
  // Block rows [begin[i], end[i]) (end: the next row's start unless bsrxmv's end pointers);
  // blocks by column, each column below nb; false when memory is missing or an index is bad.
  bool read(const FakeDeviceAt& at, int dir, int64_t mb, int64_t nb, int64_t nnzb, int64_t block, const void* row_ptr,
            const void* col_ind, int base, const void* end_ptr = nullptr) {
    if (mb < 0 || nb < 0 || nnzb < 0 || block < 1 || (dir != 0 && dir != 1)) return false;
    rows = mb * block, cols = nb * block, bd = block;
    const std::byte* o = at(reinterpret_cast<uint64_t>(row_ptr), (mb + 1) * 4);
    const std::byte* e = end_ptr ? at(reinterpret_cast<uint64_t>(end_ptr), mb * 4) : nullptr;
    const std::byte* c = at(reinterpret_cast<uint64_t>(col_ind), nnzb * 4);
    if (!o || (nnzb && !c) || (end_ptr && mb && !e)) return false;
    row.assign(rows, {});
    for (int64_t i = 0; i < mb; ++i) {
      const int64_t b = int_at(o, i) - base, en = (e ? int_at(e, i) : int_at(o, i + 1)) - base;
      if (b < 0 || en < b || en > nnzb) return false;
      for (int64_t k = b; k < en; ++k) {
        const int64_t j = int_at(c, k) - base;
        if (j < 0 || j >= nb || (k > b && j <= int_at(c, k - 1) - base)) return false;  // sorted, unique
        for (int64_t ii = 0; ii < block; ++ii)
          for (int64_t jj = 0; jj < block; ++jj)
            row[i * block + ii].push_back({j * block + jj, k * block * block + (dir == 0 ? ii * block + jj : jj * block + ii)});
      }
    }
    return true;
  }
  // The transpose's rows (op T or C), values still at their positions.
  BsrRows transposed() const {
    BsrRows t;
    t.rows = cols, t.cols = rows, t.bd = bd;
    t.row.assign(cols, {});
    for (int64_t r = 0; r < rows; ++r)
      for (auto [c, p] : row[r]) t.row[c].push_back({r, p});
    return t;
  }
};

// y = alpha A x + beta y (y's rows: A's; beta 0: y is not read).
template <class V>
void bsr_times(const BsrRows& a, const std::vector<V>& val, V alpha, const V* x, V beta, V* y) {
  for (int64_t r = 0; r < a.rows; ++r) {
    V sum{};
    for (auto [c, p] : a.row[r]) sum += val[p] * x[c];
    y[r] = alpha * sum + (beta == V{} ? V{} : beta * y[r]);
  }
}

// The arguments every BSR call checks: the handle, a general matrix descriptor, sizes.
int bsr_args(void* hp, void* dp, int dir, int mb, int nb, int nnzb, int block, Object** h, Object** d) {
  *h = live(hp, 0);
  if (!*h) return kNotInitialized;
  *d = live(dp, kMatDescr);
  if (!*d || (*d)->mat_type != 0 || mb < 0 || nb < 0 || nnzb < 0 || block < 1 || (dir != 0 && dir != 1))
    return kInvalidValue;
  return kSuccess;
}

template <class V>
int f_bsrmv(void* hp, int dir, int trans, int mb, int nb, int nnzb, const void* alpha, void* dp, const void* vals,
            const void* row_ptr, const void* col_ind, int block, const void* xp, const void* beta, void* yp) {
  std::lock_guard l(g_mu);
  Object *h, *d;
  if (int s = bsr_args(hp, dp, dir, mb, nb, nnzb, block, &h, &d)) return s;
  if (trans != 0) return kInvalidValue;  // NVIDIA's bsrmv: CUSPARSE_OPERATION_NON_TRANSPOSE only
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    BsrRows a;
    std::vector<V> val, x, y;
    V al, be;
    if (!scalar_of(*h, alpha, at, &al) || !scalar_of(*h, beta, at, &be) ||
        !a.read(at, dir, mb, nb, nnzb, block, row_ptr, col_ind, d->base) ||
        !read_values(at, vals, int64_t(nnzb) * block * block, &val) || !read_values(at, xp, a.cols, &x) ||
        !read_values(at, yp, a.rows, &y)) {
      status = kExecutionFailed;
      return;
    }
    bsr_times(a, val, al, x.data(), be, y.data());
    if (!write_values(at, yp, y)) status = kExecutionFailed;
  });
  return status;
}
// bsrxmv: bsrmv on the block rows the mask names, each from its row pointer to its end pointer;
// y's other rows are left as they are.
template <class V>
int f_bsrxmv(void* hp, int dir, int trans, int mask_size, int mb, int nb, int nnzb, const void* alpha, void* dp,
             const void* vals, const void* mask_ptr, const void* row_ptr, const void* end_ptr, const void* col_ind,
             int block, const void* xp, const void* beta, void* yp) {
  std::lock_guard l(g_mu);
  Object *h, *d;
  if (int s = bsr_args(hp, dp, dir, mb, nb, nnzb, block, &h, &d)) return s;
  if (trans != 0 || mask_size < 0 || mask_size > mb) return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    BsrRows a;
    std::vector<V> val, x, y;
    V al, be;
    const std::byte* mask = at(reinterpret_cast<uint64_t>(mask_ptr), int64_t(mask_size) * 4);
    if ((mask_size && !mask) || !scalar_of(*h, alpha, at, &al) || !scalar_of(*h, beta, at, &be) ||
        !a.read(at, dir, mb, nb, nnzb, block, row_ptr, col_ind, d->base, end_ptr) ||
        !read_values(at, vals, int64_t(nnzb) * block * block, &val) || !read_values(at, xp, a.cols, &x) ||
        !read_values(at, yp, a.rows, &y)) {
      status = kExecutionFailed;
      return;
    }
    for (int64_t m = 0; m < mask_size; ++m) {
      const int64_t i = int_at(mask, m) - d->base;
      if (i < 0 || i >= mb) {
        status = kExecutionFailed;
        return;
      }
      for (int64_t r = i * block; r < (i + 1) * block; ++r) {
        V sum{};
        for (auto [c, p] : a.row[r]) sum += val[p] * x[c];
        y[r] = al * sum + (be == V{} ? V{} : be * y[r]);
      }
    }
    if (!write_values(at, yp, y)) status = kExecutionFailed;
  });
  return status;
}
// C (mb*bs x n, column-major, ldc) = alpha A op(B) + beta C; B is kb*bs x n (ldb), or n x kb*bs
// with op T.
template <class V>
int f_bsrmm(void* hp, int dir, int transA, int transB, int mb, int n, int kb, int nnzb, const void* alpha, void* dp,
            const void* vals, const void* row_ptr, const void* col_ind, int block, const void* bp, int ldb,
            const void* beta, void* cp, int ldc) {
  std::lock_guard l(g_mu);
  Object *h, *d;
  if (int s = bsr_args(hp, dp, dir, mb, kb, nnzb, block, &h, &d)) return s;
  const int64_t m = int64_t(mb) * block, k = int64_t(kb) * block;
  if (transA != 0 || (transB != 0 && transB != 1) || n < 0 || ldb < std::max<int64_t>(1, transB ? n : k) ||
      ldc < std::max<int64_t>(1, m))
    return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    BsrRows a;
    std::vector<V> val, b, c;
    V al, be;
    const int64_t bcols = transB ? k : n;
    if (!scalar_of(*h, alpha, at, &al) || !scalar_of(*h, beta, at, &be) ||
        !a.read(at, dir, mb, kb, nnzb, block, row_ptr, col_ind, d->base) ||
        !read_values(at, vals, int64_t(nnzb) * block * block, &val) ||
        !read_values(at, bp, bcols ? (bcols - 1) * ldb + (transB ? n : k) : 0, &b) ||
        !read_values(at, cp, n ? (n - 1) * int64_t(ldc) + m : 0, &c)) {
      status = kExecutionFailed;
      return;
    }
    for (int64_t j = 0; j < n; ++j)
      for (int64_t r = 0; r < m; ++r) {
        V sum{};
        for (auto [col, p] : a.row[r]) sum += val[p] * (transB ? b[j + col * ldb] : b[col + j * ldb]);
        V& out = c[r + j * ldc];
        out = al * sum + (be == V{} ? V{} : be * out);
      }
    if (!write_values(at, cp, c)) status = kExecutionFailed;
  });
  return status;
}

// ---- BSR triangular solves: op(A) X = alpha B, A's triangle by the descriptor's fill mode
// (the diagonal blocks' elements included), its diagonal by the diagonal type.
int bsr_info_args(void* hp, void* dp, void* ip, int kind, int dir, int mb, int nnzb, int block, Object** h, Object** d,
                  Object** info) {
  if (int s = bsr_args(hp, dp, dir, mb, mb, nnzb, block, h, d)) return s;
  *info = live(ip, kind);
  return *info ? kSuccess : kInvalidValue;
}
template <int Kind>
int f_bsr_buffer_common(void* hp, void* dp, void* ip, int dir, int mb, int nnzb, int block, int* size, int rhs = 0) {
  std::lock_guard l(g_mu);
  Object *h, *d, *info;
  if (int s = bsr_info_args(hp, dp, ip, Kind, dir, mb, nnzb, block, &h, &d, &info)) return s;
  if (!size) return kInvalidValue;
  *size = 512;  // a fake's own choice
  info->rhs = rhs;
  return kSuccess;
}
int f_bsrsv_buffer(void* hp, int dir, int trans, int mb, int nnzb, void* dp, void*, void*, void*, int block, void* ip,
                   int* size) {
  if (trans < 0 || trans > 2) return kInvalidValue;
  return f_bsr_buffer_common<kBsrsv>(hp, dp, ip, dir, mb, nnzb, block, size);
}
int f_bsrsm_buffer(void* hp, int dir, int transA, int transXY, int mb, int n, int nnzb, void* dp, void*, void*, void*,
                   int block, void* ip, int* size) {
  if (transA < 0 || transA > 2 || (transXY != 0 && transXY != 1) || n < 0) return kInvalidValue;
  return f_bsr_buffer_common<kBsrsm>(hp, dp, ip, dir, mb, nnzb, block, size, n);
}
template <int Kind>
int f_bsr_factor_buffer(void* hp, int dir, int mb, int nnzb, void* dp, void*, void*, void*, int block, void* ip,
                        int* size) {
  return f_bsr_buffer_common<Kind>(hp, dp, ip, dir, mb, nnzb, block, size);
}
// The analysis: the structure (a missing diagonal block is a structural zero pivot unless the
// diagonal is unit); it marks the buffer, as the library fills it.
template <int Kind>
int bsr_analysis(void* hp, void* dp, void* ip, int dir, int mb, int nnzb, const void* row_ptr, const void* col_ind,
                 int block, void* buf, int rhs = 0) {
  std::lock_guard l(g_mu);
  Object *h, *d, *info;
  if (int s = bsr_info_args(hp, dp, ip, Kind, dir, mb, nnzb, block, &h, &d, &info)) return s;
  if (!buf || rhs > info->rhs) return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    const std::byte* o = at(reinterpret_cast<uint64_t>(row_ptr), (int64_t(mb) + 1) * 4);
    const std::byte* c = at(reinterpret_cast<uint64_t>(col_ind), int64_t(nnzb) * 4);
    std::byte* mark = at(reinterpret_cast<uint64_t>(buf), 8);
    BsrRows check;
    if (!o || (nnzb && !c) || !mark || !check.read(at, dir, mb, mb, nnzb, 1, row_ptr, col_ind, d->base)) {
      status = kExecutionFailed;
      return;
    }
    info->zero_pivot = -1;
    if ((Kind != kBsrsv && Kind != kBsrsm) || d->diag == 0)
      for (int64_t i = 0; i < mb && info->zero_pivot < 0; ++i) {
        bool has = false;
        for (int64_t k = int_at(o, i) - d->base; k < int_at(o, i + 1) - d->base; ++k) has |= int_at(c, k) - d->base == i;
        if (!has) info->zero_pivot = i;
      }
    const uint64_t magic = 0x42535230u + Kind;  // "BSR0" + the info's kind
    std::memcpy(mark, &magic, 8);
  });
  if (status == kSuccess) info->analysed = true;
  return status;
}
int f_bsrsv_analysis(void* hp, int dir, int trans, int mb, int nnzb, void* dp, const void*, const void* row_ptr,
                     const void* col_ind, int block, void* ip, int, void* buf) {
  if (trans < 0 || trans > 2) return kInvalidValue;
  return bsr_analysis<kBsrsv>(hp, dp, ip, dir, mb, nnzb, row_ptr, col_ind, block, buf);
}
int f_bsrsm_analysis(void* hp, int dir, int transA, int transXY, int mb, int n, int nnzb, void* dp, const void*,
                     const void* row_ptr, const void* col_ind, int block, void* ip, int, void* buf) {
  if (transA < 0 || transA > 2 || (transXY != 0 && transXY != 1) || n < 0) return kInvalidValue;
  return bsr_analysis<kBsrsm>(hp, dp, ip, dir, mb, nnzb, row_ptr, col_ind, block, buf, n);
}
template <int Kind>
int f_bsr_factor_analysis(void* hp, int dir, int mb, int nnzb, void* dp, const void*, const void* row_ptr,
                          const void* col_ind, int block, void* ip, int, void* buf) {
  return bsr_analysis<Kind>(hp, dp, ip, dir, mb, nnzb, row_ptr, col_ind, block, buf);
}

// Solves op(A) x = b in place (x holds b) by substitution; a zero diagonal (non-unit) is a
// numerical zero pivot at its block row (the first kept in the info), its row left as it is.
template <class V>
void substitute(const BsrRows& a, const std::vector<V>& val, bool lower, bool unit, bool conj, std::vector<V>& x,
                Object* info) {
  const int64_t n = a.rows;
  for (int64_t s = 0; s < n; ++s) {
    const int64_t r = lower ? s : n - 1 - s;
    V sum = x[r], diag{1};
    bool has_diag = false;
    for (auto [c, p] : a.row[r]) {
      const V v = conj ? conj_of(val[p]) : val[p];
      if (c == r) diag = v, has_diag = true;
      else if (lower ? c < r : c > r) sum -= v * x[c];
    }
    if (unit) diag = V{1};
    if (!unit && (!has_diag || diag == V{})) {
      const int64_t block_row = r / a.bd;
      if (info->zero_pivot < 0 || block_row < info->zero_pivot) info->zero_pivot = block_row;
      continue;
    }
    x[r] = sum / diag;
  }
}
template <class V>
int bsr_solve(void* hp, void* dp, void* ip, int kind, int dir, int trans, int mb, int nnzb, const void* alpha,
              const void* vals, const void* row_ptr, const void* col_ind, int block, int n, bool xy_transposed,
              const void* bp, int64_t ldb, void* xp, int64_t ldx, void* buf) {
  std::lock_guard l(g_mu);
  Object *h, *d, *info;
  if (int s = bsr_info_args(hp, dp, ip, kind, dir, mb, nnzb, block, &h, &d, &info)) return s;
  const int64_t m = int64_t(mb) * block;
  if (trans < 0 || trans > 2 || n < 0 || !buf || !info->analysed) return kInvalidValue;
  if (ldb < std::max<int64_t>(1, xy_transposed ? n : m) || ldx < std::max<int64_t>(1, xy_transposed ? n : m))
    return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    BsrRows a;
    std::vector<V> val, b, x;
    V al;
    const int64_t outer = xy_transposed ? m : n, inner = xy_transposed ? n : m;
    if (!scalar_of(*h, alpha, at, &al) || !a.read(at, dir, mb, mb, nnzb, block, row_ptr, col_ind, d->base) ||
        !read_values(at, vals, int64_t(nnzb) * block * block, &val) ||
        !read_values(at, bp, outer ? (outer - 1) * ldb + inner : 0, &b) ||
        !read_values(at, xp, outer ? (outer - 1) * ldx + inner : 0, &x)) {
      status = kExecutionFailed;
      return;
    }
    const bool lower = (d->fill == 0) != (trans != 0);
    const BsrRows op = trans ? a.transposed() : a;
    for (int64_t j = 0; j < n; ++j) {
      std::vector<V> col(m);
      for (int64_t i = 0; i < m; ++i) col[i] = al * (xy_transposed ? b[j + i * ldb] : b[i + j * ldb]);
      substitute(op, val, lower, d->diag == 1, trans == 2, col, info);
      for (int64_t i = 0; i < m; ++i) (xy_transposed ? x[j + i * ldx] : x[i + j * ldx]) = col[i];
    }
    if (!write_values(at, xp, x)) status = kExecutionFailed;
  });
  return status;
}
template <class V>
int f_bsrsv_solve(void* hp, int dir, int trans, int mb, int nnzb, const void* alpha, void* dp, const void* vals,
                  const void* row_ptr, const void* col_ind, int block, void* ip, const void* f, void* x, int, void* buf) {
  return bsr_solve<V>(hp, dp, ip, kBsrsv, dir, trans, mb, nnzb, alpha, vals, row_ptr, col_ind, block, 1, false, f,
                      std::max<int64_t>(1, int64_t(mb) * block), x, std::max<int64_t>(1, int64_t(mb) * block), buf);
}
template <class V>
int f_bsrsm_solve(void* hp, int dir, int transA, int transXY, int mb, int n, int nnzb, const void* alpha, void* dp,
                  const void* vals, const void* row_ptr, const void* col_ind, int block, void* ip, const void* b,
                  int ldb, void* x, int ldx, int, void* buf) {
  if (transXY != 0 && transXY != 1) return kInvalidValue;
  return bsr_solve<V>(hp, dp, ip, kBsrsm, dir, transA, mb, nnzb, alpha, vals, row_ptr, col_ind, block, n, transXY == 1,
                      b, ldb, x, ldx, buf);
}
// Block IC(0) in place: L (L L^H = A on the pattern) in the lower triangle of A's elements (the
// diagonal blocks' upper parts left as they are); a diagonal that is not positive is a
// numerical zero pivot at its block row.
// The incomplete factorizations on a BSR matrix's scalar CSR (a CSR matrix: blocks of 1): ILU(0)
// (L unit lower and U in A's pattern) or IC(0) (L L^H = A on the pattern, L in the lower
// triangle, the upper part left as it is), in place; a zero (ILU) or non-positive (IC) diagonal
// is a numerical zero pivot at its block row, unless the ILU's numeric boost replaces a diagonal
// at most tol in size by boost_val.
template <class V>
bool factor_core(const FakeDeviceAt& at, bool ilu, int dir, int64_t mb, int64_t nnzb, int64_t block, void* vals,
                 const void* row_ptr, const void* col_ind, int base, Object* info) {
  BsrRows a;
  std::vector<V> x;
  if (!a.read(at, dir, mb, mb, nnzb, block, row_ptr, col_ind, base) ||
      !read_values(at, vals, nnzb * block * block, &x))
    return false;
  auto find = [&](int64_t r, int64_t c) -> int64_t {
    for (auto [cc, p] : a.row[r])
      if (cc == c) return p;
    return -1;
  };
  auto zero_at = [&](int64_t r) {
    if (info->zero_pivot < 0 || r / block < info->zero_pivot) info->zero_pivot = r / block;
  };
  for (int64_t i = 0; i < a.rows; ++i) {
    const int64_t di = find(i, i);
    if (di < 0) continue;  // the structural zero the analysis reported
    if (ilu) {
      const auto& row = a.row[i];
      for (size_t p = 0; p < row.size() && row[p].first < i; ++p) {
        const int64_t k = row[p].first, dk = find(k, k);
        if (dk < 0 || x[dk] == V{}) continue;
        x[row[p].second] /= x[dk];
        for (size_t q = p + 1; q < row.size(); ++q) {
          const int64_t kj = find(k, row[q].first);
          if (kj >= 0) x[row[q].second] -= x[row[p].second] * x[kj];
        }
      }
      if (info->boost && std::abs(std::complex<double>(x[di])) <= info->tol) x[di] = of_complex<V>(info->boost_value);
      else if (x[di] == V{}) zero_at(i);
      continue;
    }
    for (auto [j, p] : a.row[i]) {
      if (j > i) break;
      V sum = x[p];
      for (auto [k, q] : a.row[i]) {
        if (k >= j) break;
        const int64_t jk = find(j, k);
        if (jk >= 0) sum -= x[q] * conj_of(x[jk]);
      }
      if (j < i) {
        const int64_t jj = find(j, j);
        x[p] = jj >= 0 && x[jj] != V{} ? sum / x[jj] : sum;
      } else {
        const double diag = std::real(std::complex<double>(sum));
        if (!(diag > 0)) zero_at(i);
        x[p] = V(diag > 0 ? std::sqrt(diag) : diag);
      }
    }
  }
  return write_values(at, vals, x);
}
template <class V, int Kind>
int f_bsr_factor(void* hp, int dir, int mb, int nnzb, void* dp, void* vals, const void* row_ptr, const void* col_ind,
                 int block, void* ip, int, void* buf) {
  std::lock_guard l(g_mu);
  Object *h, *d, *info;
  if (int s = bsr_info_args(hp, dp, ip, Kind, dir, mb, nnzb, block, &h, &d, &info)) return s;
  if (!buf || !info->analysed) return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    if (!factor_core<V>(at, Kind != kBsric, dir, mb, nnzb, block, vals, row_ptr, col_ind, d->base, info))
      status = kExecutionFailed;
  });
  return status;
}
// csrilu02 / csric02 of complex values: the BSR factorization with blocks of 1.
template <class V, int Kind>
int f_csr_factor(void* hp, int m, int nnz, void* dp, void* vals, void* rows, void* cols, void* ip, int, void* buf) {
  std::lock_guard l(g_mu);
  Object *h, *d, *info;
  if (int s = factor_args(hp, dp, ip, Kind, m, nnz, &h, &d, &info)) return s;
  if (!buf || !info->analysed) return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    if (!factor_core<V>(at, Kind == kIlu, 0, m, nnz, 1, vals, rows, cols, d->base, info)) status = kExecutionFailed;
  });
  return status;
}
// The numeric boost of csrilu02 (complex) and bsrilu02: tol a double, boost_val of the type.
template <class V, int Kind>
int f_boost(void* hp, void* ip, int enable, const void* tol, const void* boost_val) {
  std::lock_guard l(g_mu);
  Object* h = live(hp, 0);
  if (!h) return kNotInitialized;
  Object* info = live(ip, Kind);
  if (!info) return kInvalidValue;
  info->boost = enable != 0;
  if (!info->boost) return kSuccess;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    V v{};
    if (!scalar_of(*h, tol, at, &info->tol) || !scalar_of(*h, boost_val, at, &v)) {
      status = h->pointer_mode ? kExecutionFailed : kInvalidValue;
      return;
    }
    info->boost_value = std::complex<double>(v);
  });
  return status;
}

// ---- pruning to CSR (fp16, fp32, fp64): |a| > threshold kept, row pointers and nnz total first (Nnz),
// then values and columns, by C's index base. By percentage, the threshold is the sorted
// magnitudes' element at floor(count * percentage / 100) (clamped), as NVIDIA's library chooses
// it (on the H100 30 elements pruned by 40% keep 17, 17 by 50% keep 8).
struct Kept {
  std::vector<int64_t> off;  // C's row offsets (zero-based)
  std::vector<std::pair<int64_t, int64_t>> at;  // (column, source index) of each kept element
};
template <class V>
double threshold_by_percentage(std::vector<V> v, float percentage) {
  if (v.empty()) return 0;
  std::vector<double> mag(v.size());
  for (size_t i = 0; i < v.size(); ++i) mag[i] = magnitude(v[i]);
  std::sort(mag.begin(), mag.end());
  int64_t pos = static_cast<int64_t>(std::floor(double(mag.size()) * (percentage / 100.0)));
  pos = std::clamp<int64_t>(pos, 0, int64_t(mag.size()) - 1);
  return mag[pos];
}
// A dense m x n (column-major, lda) source: what is kept, row by row.
template <class V>
Kept keep_dense(const std::vector<V>& a, int64_t m, int64_t n, int64_t lda, double threshold) {
  Kept k;
  k.off.push_back(0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j)
      if (magnitude(a[i + j * lda]) > threshold) k.at.push_back({j, i + j * lda});
    k.off.push_back(int64_t(k.at.size()));
  }
  return k;
}
template <class V>
Kept keep_csr(const std::vector<V>& val, const LegacyCsr& a, int64_t m, double threshold) {
  Kept k;
  k.off.push_back(0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = a.off[i]; p < a.off[i + 1]; ++p)
      if (magnitude(val[p]) > threshold) k.at.push_back({a.col[p], p});
    k.off.push_back(int64_t(k.at.size()));
  }
  return k;
}
// Writes C's row offsets and the nnz total (Nnz), or its values and columns.
template <class V>
bool write_kept(const FakeDeviceAt& at, const Object& h, const Kept& k, int base, int64_t m, void* row_c, int* nnz,
                const std::vector<V>* src, void* val_c, void* col_c) {
  if (nnz) {
    std::byte* o = at(reinterpret_cast<uint64_t>(row_c), (m + 1) * 4);
    if (!o) return false;
    for (int64_t i = 0; i <= m; ++i) put_int(o, i, static_cast<int32_t>(k.off[i] + base));
    return put_mode_int(h, nnz, static_cast<int>(k.at.size()), at);
  }
  std::vector<V> v(k.at.size());
  std::byte* c = at(reinterpret_cast<uint64_t>(col_c), k.at.size() * 4);
  if (!k.at.empty() && !c) return false;
  for (size_t e = 0; e < k.at.size(); ++e) v[e] = (*src)[k.at[e].second], put_int(c, e, int32_t(k.at[e].first + base));
  return write_values(at, val_c, v);
}
int prune_args(void* hp, void* dc, int m, int n, Object** h, Object** d) {
  *h = live(hp, 0);
  if (!*h) return kNotInitialized;
  *d = live(dc, kMatDescr);
  return *d && (*d)->mat_type == 0 && m >= 0 && n >= 0 ? kSuccess : kInvalidValue;
}
// Dense source; `percentage` < 0: by `threshold`.
template <class V>
int prune_dense(void* hp, int m, int n, const void* ap, int lda, const void* threshold, float percentage, void* dc,
                void* info, void* row_c, int* nnz, void* val_c, void* col_c, void* buf) {
  std::lock_guard l(g_mu);
  Object *h, *d;
  if (int s = prune_args(hp, dc, m, n, &h, &d)) return s;
  if (lda < std::max(1, m) || !buf || (nnz == nullptr) == (val_c == nullptr) || (info && !live(info, kPrune)) ||
      (info && (percentage < 0 || percentage > 100)))
    return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    std::vector<V> a;
    V t{};
    if (!read_values(at, ap, n ? (int64_t(n) - 1) * lda + m : 0, &a) || (!info && !scalar_of(*h, threshold, at, &t))) {
      status = !info && !threshold ? kInvalidValue : kExecutionFailed;
      return;
    }
    std::vector<V> dense;
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < m; ++i) dense.push_back(a[i + j * lda]);
    const double cut = info ? threshold_by_percentage(dense, percentage) : double(t);
    if (info) static_cast<Object*>(info)->tol = cut;  // the threshold chosen, as the library keeps it
    const Kept k = keep_dense(a, m, n, lda, cut);
    if (!write_kept<V>(at, *h, k, d->base, m, row_c, nnz, &a, val_c, col_c)) status = kExecutionFailed;
  });
  return status;
}
template <class V>
int prune_csr(void* hp, int m, int n, int nnz_a, void* da, const void* val_a, const void* row_a, const void* col_a,
              const void* threshold, float percentage, void* dc, void* info, void* row_c, int* nnz, void* val_c,
              void* col_c, void* buf) {
  std::lock_guard l(g_mu);
  Object *h, *d;
  if (int s = prune_args(hp, dc, m, n, &h, &d)) return s;
  Object* descr_a = live(da, kMatDescr);
  if (!descr_a || descr_a->mat_type != 0 || nnz_a < 0 || !buf || (nnz == nullptr) == (val_c == nullptr) ||
      (info && !live(info, kPrune)) || (info && (percentage < 0 || percentage > 100)))
    return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    LegacyCsr a;
    std::vector<V> val;
    V t{};
    // LegacyCsr reads a square matrix's columns: n columns here.
    const std::byte* o = at(reinterpret_cast<uint64_t>(row_a), (int64_t(m) + 1) * 4);
    const std::byte* c = at(reinterpret_cast<uint64_t>(col_a), int64_t(nnz_a) * 4);
    if (!o || (nnz_a && !c) || !read_values(at, val_a, nnz_a, &val) || (!info && !scalar_of(*h, threshold, at, &t))) {
      status = kExecutionFailed;
      return;
    }
    a.m = m;
    a.off.resize(m + 1);
    a.col.resize(nnz_a);
    for (int64_t r = 0; r <= m; ++r) a.off[r] = int_at(o, r) - descr_a->base;
    for (int64_t k = 0; k < nnz_a; ++k) a.col[k] = int_at(c, k) - descr_a->base;
    for (int64_t r = 0; r < m; ++r)
      if (a.off[r] < 0 || a.off[r + 1] < a.off[r] || a.off[r + 1] > nnz_a) return void(status = kExecutionFailed);
    for (int64_t k = 0; k < nnz_a; ++k)
      if (a.col[k] < 0 || a.col[k] >= n) return void(status = kExecutionFailed);
    const double cut = info ? threshold_by_percentage(val, percentage) : double(t);
    if (info) static_cast<Object*>(info)->tol = cut;
    const Kept k = keep_csr(val, a, m, cut);
    if (!write_kept<V>(at, *h, k, d->base, m, row_c, nnz, &val, val_c, col_c)) status = kExecutionFailed;
  });
  return status;
}
int f_prune_buffer_dense(void* hp, int m, int n, const void*, int lda, const void*, void* dc, const void*,
                         const void*, const void*, size_t* size) {
  std::lock_guard l(g_mu);
  Object *h, *d;
  if (int s = prune_args(hp, dc, m, n, &h, &d)) return s;
  if (lda < std::max(1, m) || !size) return kInvalidValue;
  *size = 512;
  return kSuccess;
}
int f_prune_buffer_dense_pct(void* hp, int m, int n, const void*, int lda, float pct, void* dc, const void*,
                             const void*, const void*, void* info, size_t* size) {
  {
    std::lock_guard l(g_mu);
    if (live(hp, 0) && !live(info, kPrune)) return kInvalidValue;
  }
  if (pct < 0 || pct > 100) return kInvalidValue;
  return f_prune_buffer_dense(hp, m, n, nullptr, lda, nullptr, dc, nullptr, nullptr, nullptr, size);
}
int f_prune_buffer_csr(void* hp, int m, int n, int nnz_a, void* da, const void*, const void*, const void*, const void*,
                       void* dc, const void*, const void*, const void*, size_t* size) {
  std::lock_guard l(g_mu);
  Object *h, *d;
  if (int s = prune_args(hp, dc, m, n, &h, &d)) return s;
  if (!live(da, kMatDescr) || nnz_a < 0 || !size) return kInvalidValue;
  *size = 512;
  return kSuccess;
}
int f_prune_buffer_csr_pct(void* hp, int m, int n, int nnz_a, void* da, const void*, const void*, const void*,
                           float pct, void* dc, const void*, const void*, const void*, void* info, size_t* size) {
  {
    std::lock_guard l(g_mu);
    if (live(hp, 0) && !live(info, kPrune)) return kInvalidValue;
  }
  if (pct < 0 || pct > 100) return kInvalidValue;
  return f_prune_buffer_csr(hp, m, n, nnz_a, da, nullptr, nullptr, nullptr, nullptr, dc, nullptr, nullptr, nullptr, size);
}
template <class V>
int f_prune_dense_nnz(void* hp, int m, int n, const void* a, int lda, const void* t, void* dc, void* row_c, int* nnz,
                      void* buf) {
  if (!nnz) return kInvalidValue;
  return prune_dense<V>(hp, m, n, a, lda, t, -1, dc, nullptr, row_c, nnz, nullptr, nullptr, buf);
}
template <class V>
int f_prune_dense(void* hp, int m, int n, const void* a, int lda, const void* t, void* dc, void* val_c,
                  const void* row_c, void* col_c, void* buf) {
  if (!val_c) return kInvalidValue;
  return prune_dense<V>(hp, m, n, a, lda, t, -1, dc, nullptr, const_cast<void*>(row_c), nullptr, val_c, col_c, buf);
}
template <class V>
int f_prune_dense_nnz_pct(void* hp, int m, int n, const void* a, int lda, float pct, void* dc, void* row_c, int* nnz,
                          void* info, void* buf) {
  if (!nnz || !info) return kInvalidValue;
  return prune_dense<V>(hp, m, n, a, lda, nullptr, pct, dc, info, row_c, nnz, nullptr, nullptr, buf);
}
template <class V>
int f_prune_dense_pct(void* hp, int m, int n, const void* a, int lda, float pct, void* dc, void* val_c,
                      const void* row_c, void* col_c, void* info, void* buf) {
  if (!val_c || !info) return kInvalidValue;
  return prune_dense<V>(hp, m, n, a, lda, nullptr, pct, dc, info, const_cast<void*>(row_c), nullptr, val_c, col_c, buf);
}
template <class V>
int f_prune_csr_nnz(void* hp, int m, int n, int nnz_a, void* da, const void* va, const void* ra, const void* ca,
                    const void* t, void* dc, void* row_c, int* nnz, void* buf) {
  if (!nnz) return kInvalidValue;
  return prune_csr<V>(hp, m, n, nnz_a, da, va, ra, ca, t, -1, dc, nullptr, row_c, nnz, nullptr, nullptr, buf);
}
template <class V>
int f_prune_csr(void* hp, int m, int n, int nnz_a, void* da, const void* va, const void* ra, const void* ca,
                const void* t, void* dc, void* val_c, const void* row_c, void* col_c, void* buf) {
  if (!val_c) return kInvalidValue;
  return prune_csr<V>(hp, m, n, nnz_a, da, va, ra, ca, t, -1, dc, nullptr, const_cast<void*>(row_c), nullptr, val_c,
                      col_c, buf);
}
template <class V>
int f_prune_csr_nnz_pct(void* hp, int m, int n, int nnz_a, void* da, const void* va, const void* ra, const void* ca,
                        float pct, void* dc, void* row_c, int* nnz, void* info, void* buf) {
  if (!nnz || !info) return kInvalidValue;
  return prune_csr<V>(hp, m, n, nnz_a, da, va, ra, ca, nullptr, pct, dc, info, row_c, nnz, nullptr, nullptr, buf);
}
template <class V>
int f_prune_csr_pct(void* hp, int m, int n, int nnz_a, void* da, const void* va, const void* ra, const void* ca,
                    float pct, void* dc, void* val_c, const void* row_c, void* col_c, void* info, void* buf) {
  if (!val_c || !info) return kInvalidValue;
  return prune_csr<V>(hp, m, n, nnz_a, da, va, ra, ca, nullptr, pct, dc, info, const_cast<void*>(row_c), nullptr,
                      val_c, col_c, buf);
}


// ---- the legacy calls of the four value types the fake had not yet: CSC sort, dense nonzero
// counts (?nnz), C = alpha A + beta B (csrgeam2), gtsv2 of complex values, interleaved batches of
// tridiagonal and pentadiagonal systems (the fake eliminates without pivoting whatever the
// algorithm asked: its tests' systems are diagonally dominant)

// The CSC sort is the CSR sort of the transpose: columns for rows.
int f_cscsort(void* hp, int m, int n, int nnz, void* dp, const void* col_ptr, void* rows, void* perm, void* buf) {
  return f_csrsort(hp, n, m, nnz, dp, col_ptr, rows, perm, buf);
}

// Nonzeros of a dense m x n matrix (column-major, lda) per row (dir ROW) or per column, and in all.
template <class V>
int f_nnz(void* hp, int dir, int m, int n, void* dp, const void* ap, int lda, void* per, int* total) {
  std::lock_guard l(g_mu);
  Object* h = live(hp, 0);
  if (!h) return kNotInitialized;
  Object* d = live(dp, kMatDescr);
  if (!d || d->mat_type != 0 || (dir != 0 && dir != 1) || m < 0 || n < 0 || lda < std::max(1, m) || !total)
    return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    std::vector<V> a;
    std::byte* counts = at(reinterpret_cast<uint64_t>(per), int64_t(dir == 0 ? m : n) * 4);
    if (!read_values(at, ap, n ? (int64_t(n) - 1) * lda + m : 0, &a) || (!counts && (dir == 0 ? m : n))) {
      status = kExecutionFailed;
      return;
    }
    int all = 0;
    for (int64_t k = 0; k < (dir == 0 ? m : n); ++k) {
      int here = 0;
      for (int64_t e = 0; e < (dir == 0 ? n : m); ++e) here += (dir == 0 ? a[k + e * lda] : a[e + k * lda]) != V{};
      put_int(counts, k, here);
      all += here;
    }
    if (!put_mode_int(*h, total, all, at)) status = kExecutionFailed;
  });
  return status;
}

// A general CSR (m rows, n columns, 32-bit indices by its descriptor's base, sorted within rows).
struct GeneralCsr {
  std::vector<int64_t> off, col;
  bool read(const FakeDeviceAt& at, int64_t m, int64_t n, int64_t nnz, const void* row_ptr, const void* col_ind,
            int base) {
    const std::byte* o = at(reinterpret_cast<uint64_t>(row_ptr), (m + 1) * 4);
    const std::byte* c = at(reinterpret_cast<uint64_t>(col_ind), nnz * 4);
    if (!o || (nnz && !c)) return false;
    off.resize(m + 1), col.resize(nnz);
    for (int64_t r = 0; r <= m; ++r) off[r] = int_at(o, r) - base;
    for (int64_t k = 0; k < nnz; ++k) col[k] = int_at(c, k) - base;
    if (off[0] != 0 || off[m] != nnz) return false;
    for (int64_t r = 0; r < m; ++r) {
      if (off[r + 1] < off[r]) return false;
      for (int64_t k = off[r]; k < off[r + 1]; ++k)
        if (col[k] < 0 || col[k] >= n || (k > off[r] && col[k] <= col[k - 1])) return false;
    }
    return true;
  }
};
// The arguments of every csrgeam2 call: the handle, three general descriptors, sizes.
int geam_args(void* hp, void* da, void* db, void* dc, int m, int n, int nnz_a, int nnz_b, Object** h, Object** a,
              Object** b, Object** c) {
  *h = live(hp, 0);
  if (!*h) return kNotInitialized;
  *a = live(da, kMatDescr), *b = live(db, kMatDescr), *c = live(dc, kMatDescr);
  if (!*a || !*b || !*c || (*a)->mat_type || (*b)->mat_type || (*c)->mat_type || m < 0 || n < 0 || nnz_a < 0 ||
      nnz_b < 0)
    return kInvalidValue;
  return kSuccess;
}
// C's pattern is the union of A's and B's, row by row (whatever alpha and beta are).
void geam_pattern(const GeneralCsr& a, const GeneralCsr& b, int64_t m, std::vector<int64_t>* off,
                  std::vector<std::pair<int64_t, std::pair<int64_t, int64_t>>>* at) {
  off->assign(1, 0);
  for (int64_t r = 0; r < m; ++r) {
    int64_t i = a.off[r], j = b.off[r];
    while (i < a.off[r + 1] || j < b.off[r + 1]) {
      const int64_t ca = i < a.off[r + 1] ? a.col[i] : INT64_MAX, cb = j < b.off[r + 1] ? b.col[j] : INT64_MAX;
      const int64_t c = std::min(ca, cb);
      at->push_back({c, {ca == c ? i++ : -1, cb == c ? j++ : -1}});
    }
    off->push_back(int64_t(at->size()));
  }
}
int f_geam_nnz(void* hp, int m, int n, void* da, int nnz_a, const void* ra, const void* ca, void* db, int nnz_b,
               const void* rb, const void* cb, void* dc, void* rc, int* total, void* buf) {
  std::lock_guard l(g_mu);
  Object *h, *a, *b, *c;
  if (int s = geam_args(hp, da, db, dc, m, n, nnz_a, nnz_b, &h, &a, &b, &c)) return s;
  if (!total || !buf) return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    GeneralCsr ma, mb;
    std::byte* out = at(reinterpret_cast<uint64_t>(rc), (int64_t(m) + 1) * 4);
    if (!out || !ma.read(at, m, n, nnz_a, ra, ca, a->base) || !mb.read(at, m, n, nnz_b, rb, cb, b->base)) {
      status = kExecutionFailed;
      return;
    }
    std::vector<int64_t> off;
    std::vector<std::pair<int64_t, std::pair<int64_t, int64_t>>> where;
    geam_pattern(ma, mb, m, &off, &where);
    for (int64_t r = 0; r <= m; ++r) put_int(out, r, int32_t(off[r] + c->base));
    if (!put_mode_int(*h, total, int(where.size()), at)) status = kExecutionFailed;
  });
  return status;
}
int f_geam_buffer(void* hp, int m, int n, const void*, void* da, int nnz_a, const void*, const void*, const void*,
                  const void*, void* db, int nnz_b, const void*, const void*, const void*, void* dc, const void*,
                  const void*, const void*, size_t* size) {
  std::lock_guard l(g_mu);
  Object *h, *a, *b, *c;
  if (int s = geam_args(hp, da, db, dc, m, n, nnz_a, nnz_b, &h, &a, &b, &c)) return s;
  if (!size) return kInvalidValue;
  *size = 256 + 4 * size_t(m);  // a fake's own choice
  return kSuccess;
}
template <class V>
int f_geam(void* hp, int m, int n, const void* alpha, void* da, int nnz_a, const void* va, const void* ra,
           const void* ca, const void* beta, void* db, int nnz_b, const void* vb, const void* rb, const void* cb,
           void* dc, void* vc, void* rc, void* cc, void* buf) {
  std::lock_guard l(g_mu);
  Object *h, *a, *b, *c;
  if (int s = geam_args(hp, da, db, dc, m, n, nnz_a, nnz_b, &h, &a, &b, &c)) return s;
  if (!buf) return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    GeneralCsr ma, mb;
    std::vector<V> xa, xb;
    V al, be;
    if (!scalar_of(*h, alpha, at, &al) || !scalar_of(*h, beta, at, &be) || !ma.read(at, m, n, nnz_a, ra, ca, a->base) ||
        !mb.read(at, m, n, nnz_b, rb, cb, b->base) || !read_values(at, va, nnz_a, &xa) ||
        !read_values(at, vb, nnz_b, &xb)) {
      status = kExecutionFailed;
      return;
    }
    std::vector<int64_t> off;
    std::vector<std::pair<int64_t, std::pair<int64_t, int64_t>>> where;
    geam_pattern(ma, mb, m, &off, &where);
    // C's row pointers are what Xcsrgeam2Nnz wrote: they must say the union's sizes.
    const std::byte* o = at(reinterpret_cast<uint64_t>(rc), (int64_t(m) + 1) * 4);
    std::byte* cols = at(reinterpret_cast<uint64_t>(cc), where.size() * 4);
    if (!o || (!where.empty() && !cols)) {
      status = kExecutionFailed;
      return;
    }
    for (int64_t r = 0; r <= m; ++r)
      if (int_at(o, r) - c->base != off[r]) {
        status = kExecutionFailed;
        return;
      }
    std::vector<V> out(where.size());
    for (size_t e = 0; e < where.size(); ++e) {
      const auto [col, from] = where[e];
      out[e] = (from.first >= 0 ? al * xa[from.first] : V{}) + (from.second >= 0 ? be * xb[from.second] : V{});
      put_int(cols, e, int32_t(col + c->base));
    }
    if (!write_values(at, vc, out)) status = kExecutionFailed;
  });
  return status;
}

// Thomas's elimination of one tridiagonal system whose element i is at first + i * stride.
template <class V>
void thomas_of(const V* dl, const V* d, const V* du, V* x, int64_t m, int64_t first, int64_t stride) {
  std::vector<V> cp(m), dp(m);
  for (int64_t i = 0; i < m; ++i) {
    const int64_t k = first + i * stride;
    const V a = i ? dl[k] : V{}, den = d[k] - (i ? a * cp[i - 1] : V{});
    cp[i] = du[k] / den;
    dp[i] = (x[k] - (i ? a * dp[i - 1] : V{})) / den;
  }
  for (int64_t i = m - 1; i >= 0; --i) {
    if (i < m - 1) dp[i] -= cp[i] * dp[i + 1];
    x[first + i * stride] = dp[i];
  }
}
// gtsv2 / gtsv2_nopivot of complex values: B (m x n, ldb) overwritten by the solution.
template <class V>
int f_gtsv_v(void* hp, int m, int n, const void* dl, const void* d, const void* du, void* b, int ldb, void* buf) {
  std::lock_guard l(g_mu);
  if (!live(hp, 0)) return kNotInitialized;
  if (m < 3 || n < 0 || ldb < m || !buf) return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    std::vector<V> l_, c_, u_, x;
    if (!read_values(at, dl, m, &l_) || !read_values(at, d, m, &c_) || !read_values(at, du, m, &u_) ||
        !read_values(at, b, n ? (int64_t(n) - 1) * ldb + m : 0, &x)) {
      status = kExecutionFailed;
      return;
    }
    for (int64_t j = 0; j < n; ++j) {
      std::vector<V> col(x.begin() + j * ldb, x.begin() + j * ldb + m);
      thomas_of(l_.data(), c_.data(), u_.data(), col.data(), m, 0, 1);
      std::copy(col.begin(), col.end(), x.begin() + j * ldb);
    }
    if (!write_values(at, b, x)) status = kExecutionFailed;
  });
  return status;
}
template <class V>
int f_gtsv_stride_v(void* hp, int m, const void* dl, const void* d, const void* du, void* x, int batch, int stride,
                    void* buf) {
  std::lock_guard l(g_mu);
  if (!live(hp, 0)) return kNotInitialized;
  if (m < 3 || batch < 0 || stride < m || !buf) return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    const int64_t n = batch ? (int64_t(batch) - 1) * stride + m : 0;
    std::vector<V> l_, c_, u_, b;
    if (!read_values(at, dl, n, &l_) || !read_values(at, d, n, &c_) || !read_values(at, du, n, &u_) ||
        !read_values(at, x, n, &b)) {
      status = kExecutionFailed;
      return;
    }
    for (int64_t k = 0; k < batch; ++k) thomas_of(l_.data(), c_.data(), u_.data(), b.data(), m, k * stride, 1);
    if (!write_values(at, x, b)) status = kExecutionFailed;
  });
  return status;
}
int f_interleaved_buffer(void* hp, int algo, int m, const void*, const void*, const void*, const void*, int batch,
                         size_t* size) {
  std::lock_guard l(g_mu);
  if (!live(hp, 0)) return kNotInitialized;
  if (algo < 0 || algo > 2 || m < 1 || batch < 0 || !size) return kInvalidValue;
  *size = 64 + 16 * size_t(m) * size_t(batch);
  return kSuccess;
}
// Interleaved: element i of system k at i * batch + k.
template <class V>
int f_gtsv_interleaved(void* hp, int algo, int m, void* dl, void* d, void* du, void* x, int batch, void* buf) {
  std::lock_guard l(g_mu);
  if (!live(hp, 0)) return kNotInitialized;
  if (algo < 0 || algo > 2 || m < 1 || batch < 0 || !buf) return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    const int64_t n = int64_t(m) * batch;
    std::vector<V> l_, c_, u_, b;
    if (!read_values(at, dl, n, &l_) || !read_values(at, d, n, &c_) || !read_values(at, du, n, &u_) ||
        !read_values(at, x, n, &b)) {
      status = kExecutionFailed;
      return;
    }
    for (int64_t k = 0; k < batch; ++k) thomas_of(l_.data(), c_.data(), u_.data(), b.data(), m, k, batch);
    if (!write_values(at, x, b)) status = kExecutionFailed;
  });
  return status;
}
int f_gpsv_buffer(void* hp, int algo, int m, const void*, const void*, const void*, const void*, const void*,
                  const void*, int batch, size_t* size) {
  std::lock_guard l(g_mu);
  if (!live(hp, 0)) return kNotInitialized;
  if (algo != 0 || m < 1 || batch < 0 || !size) return kInvalidValue;  // QR (0) only, as NVIDIA's
  *size = 64 + 32 * size_t(m) * size_t(batch);
  return kSuccess;
}
// Pentadiagonal: ds (x[i-2]), dl, d, du, dw (x[i+2]), interleaved; banded elimination.
template <class V>
int f_gpsv_interleaved(void* hp, int algo, int m, void* ds, void* dl, void* d, void* du, void* dw, void* x, int batch,
                       void* buf) {
  std::lock_guard l(g_mu);
  if (!live(hp, 0)) return kNotInitialized;
  if (algo != 0 || m < 1 || batch < 0 || !buf) return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    const int64_t n = int64_t(m) * batch;
    std::vector<V> bands[5], b;
    const void* from[5] = {ds, dl, d, du, dw};
    for (int k = 0; k < 5; ++k)
      if (!read_values(at, from[k], n, &bands[k])) status = kExecutionFailed;
    if (status != kSuccess || !read_values(at, x, n, &b)) {
      status = kExecutionFailed;
      return;
    }
    for (int64_t s = 0; s < batch; ++s) {
      // row i's band: columns i-2 .. i+2 at 0 .. 4
      std::vector<std::array<V, 5>> a(m);
      std::vector<V> r(m);
      for (int64_t i = 0; i < m; ++i) {
        for (int k = 0; k < 5; ++k) a[i][k] = bands[k][i * batch + s];
        r[i] = b[i * batch + s];
      }
      for (int64_t k = 0; k < m; ++k)
        for (int64_t i = k + 1; i <= std::min<int64_t>(k + 2, m - 1); ++i) {
          const V f = a[i][k - i + 2] / a[k][2];
          for (int64_t j = k; j <= std::min<int64_t>(k + 2, m - 1); ++j) a[i][j - i + 2] -= f * a[k][j - k + 2];
          r[i] -= f * r[k];
        }
      for (int64_t i = m - 1; i >= 0; --i) {
        V sum = r[i];
        for (int64_t j = i + 1; j <= std::min<int64_t>(i + 2, m - 1); ++j) sum -= a[i][j - i + 2] * r[j];
        r[i] = sum / a[i][2];
      }
      for (int64_t i = 0; i < m; ++i) b[i * batch + s] = r[i];
    }
    if (!write_values(at, x, b)) status = kExecutionFailed;
  });
  return status;
}


// csrcolor: a greedy coloring of the graph of A's off-diagonal entries (i, j adjacent when either
// names the other) over the first ceil(fractionToColor * m) nodes; each node after those gets a
// color of its own, as NVIDIA's documents the fraction. reordering (optional): the nodes grouped
// by color, each group in node order. The colors come from 0; ncolors by the pointer mode.
constexpr int kColorInfo = 10;
template <class F>
int f_csrcolor(void* hp, int m, int nnz, void* dp, const void*, const void* row_ptr, const void* col_ind,
               const void* fraction, int* ncolors, void* coloring, void* reordering, void* ip) {
  std::lock_guard l(g_mu);
  Object* h = live(hp, 0);
  if (!h) return kNotInitialized;
  Object* d = live(dp, kMatDescr);
  if (!d || d->mat_type != 0 || !live(ip, kColorInfo) || m < 0 || nnz < 0 || !ncolors) return kInvalidValue;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    GeneralCsr a;
    F frac{};
    std::byte* color = at(reinterpret_cast<uint64_t>(coloring), int64_t(m) * 4);
    std::byte* order = reordering ? at(reinterpret_cast<uint64_t>(reordering), int64_t(m) * 4) : nullptr;
    if (!scalar_of(*h, fraction, at, &frac) || !a.read(at, m, m, nnz, row_ptr, col_ind, d->base) ||
        (m && !color) || (reordering && m && !order)) {
      status = kExecutionFailed;
      return;
    }
    std::vector<std::set<int64_t>> adj(m);
    for (int64_t r = 0; r < m; ++r)
      for (int64_t k = a.off[r]; k < a.off[r + 1]; ++k)
        if (a.col[k] != r) adj[r].insert(a.col[k]), adj[a.col[k]].insert(r);
    const int64_t greedy = std::min<int64_t>(m, int64_t(std::ceil(double(frac) * m)));
    std::vector<int> c(m, -1);
    int colors = 0;
    for (int64_t i = 0; i < m; ++i) {
      if (i >= greedy) {
        c[i] = colors++;
        continue;
      }
      std::set<int> used;
      for (int64_t j : adj[i]) used.insert(c[j]);
      int pick = 0;
      while (used.count(pick)) ++pick;
      c[i] = pick;
      colors = std::max(colors, pick + 1);
    }
    std::vector<int64_t> by_color(m);
    for (int64_t i = 0; i < m; ++i) by_color[i] = i, put_int(color, i, c[i]);
    std::stable_sort(by_color.begin(), by_color.end(), [&](int64_t x, int64_t y) { return c[x] < c[y]; });
    if (order)
      for (int64_t i = 0; i < m; ++i) put_int(order, i, int32_t(by_color[i]));
    if (!put_mode_int(*h, ncolors, colors, at)) status = kExecutionFailed;
  });
  return status;
}

}  // namespace

void* fake_cusparse_symbol(const char* name) {
  static const std::map<std::string, void*> t = {
      {"cusparseCreate", reinterpret_cast<void*>(f_create)},
      {"cusparseDestroy", reinterpret_cast<void*>(f_destroy)},
      {"cusparseSetStream", reinterpret_cast<void*>(f_set_stream)},
      {"cusparseGetVersion", reinterpret_cast<void*>(f_get_version)},
      {"cusparseSetPointerMode", reinterpret_cast<void*>(f_set_pointer_mode)},
      {"cusparseCreateCsr", reinterpret_cast<void*>(f_create_csr)},
      {"cusparseCreateConstCsr", reinterpret_cast<void*>(f_create_csr)},
      {"cusparseCreateCoo", reinterpret_cast<void*>(f_create_coo)},
      {"cusparseCreateConstCoo", reinterpret_cast<void*>(f_create_coo)},
      {"cusparseCreateDnVec", reinterpret_cast<void*>(f_create_dnvec)},
      {"cusparseCreateConstDnVec", reinterpret_cast<void*>(f_create_dnvec)},
      {"cusparseCreateDnMat", reinterpret_cast<void*>(f_create_dnmat)},
      {"cusparseCreateConstDnMat", reinterpret_cast<void*>(f_create_dnmat)},
      {"cusparseDestroySpMat", reinterpret_cast<void*>(f_destroy_spmat)},
      {"cusparseDestroyDnVec", reinterpret_cast<void*>(f_destroy_dnvec)},
      {"cusparseDestroyDnMat", reinterpret_cast<void*>(f_destroy_dnmat)},
      {"cusparseCsrSetPointers", reinterpret_cast<void*>(f_csr_set_pointers)},
      {"cusparseSpMatGetFormat", reinterpret_cast<void*>(f_spmat_get_format)},
      {"cusparseDnVecGet", reinterpret_cast<void*>(f_dnvec_get)},
      {"cusparseDnVecGetValues", reinterpret_cast<void*>(f_dnvec_get_values)},
      {"cusparseDnVecSetValues", reinterpret_cast<void*>(f_dnvec_set_values)},
      {"cusparseDnMatGetValues", reinterpret_cast<void*>(f_dnmat_get_values)},
      {"cusparseSpMV_bufferSize", reinterpret_cast<void*>(f_spmv_buffer)},
      {"cusparseSpMV", reinterpret_cast<void*>(f_spmv)},
      {"cusparseSpMM_bufferSize", reinterpret_cast<void*>(f_spmm_buffer)},
      {"cusparseSpMM", reinterpret_cast<void*>(f_spmm)},
      {"cusparseSpMatSetAttribute", reinterpret_cast<void*>(f_spmat_set_attribute)},
      {"cusparseSpSV_createDescr", reinterpret_cast<void*>(f_spsv_create)},
      {"cusparseSpSV_destroyDescr", reinterpret_cast<void*>(f_spsv_destroy)},
      {"cusparseSpSV_bufferSize", reinterpret_cast<void*>(f_spsv_buffer)},
      {"cusparseSpSV_analysis", reinterpret_cast<void*>(f_spsv_analysis)},
      {"cusparseSpSV_solve", reinterpret_cast<void*>(f_spsv_solve)},
      {"cusparseSpGEMM_createDescr", reinterpret_cast<void*>(f_spgemm_create)},
      {"cusparseSpGEMM_destroyDescr", reinterpret_cast<void*>(f_spgemm_destroy)},
      {"cusparseSpGEMM_workEstimation", reinterpret_cast<void*>(f_spgemm_estimate)},
      {"cusparseSpGEMM_compute", reinterpret_cast<void*>(f_spgemm_compute)},
      {"cusparseSpGEMM_copy", reinterpret_cast<void*>(f_spgemm_copy)},
      {"cusparseSpMatGetSize", reinterpret_cast<void*>(f_spmat_get_size)},
      // the legacy API
      {"cusparseCreateMatDescr", reinterpret_cast<void*>(f_create_mat_descr)},
      {"cusparseDestroyMatDescr", reinterpret_cast<void*>(f_destroy_mat_descr)},
      {"cusparseSetMatType", reinterpret_cast<void*>(f_set_mat<&Object::mat_type, 4>)},
      {"cusparseSetMatFillMode", reinterpret_cast<void*>(f_set_mat<&Object::fill, 2>)},
      {"cusparseSetMatDiagType", reinterpret_cast<void*>(f_set_mat<&Object::diag, 2>)},
      {"cusparseSetMatIndexBase", reinterpret_cast<void*>(f_set_mat<&Object::base, 2>)},
      {"cusparseCreateCsrilu02Info", reinterpret_cast<void*>(f_create_info<kIlu>)},
      {"cusparseDestroyCsrilu02Info", reinterpret_cast<void*>(f_destroy_info<kIlu>)},
      {"cusparseCreateCsric02Info", reinterpret_cast<void*>(f_create_info<kIc>)},
      {"cusparseDestroyCsric02Info", reinterpret_cast<void*>(f_destroy_info<kIc>)},
      {"cusparseScsrilu02_bufferSize", reinterpret_cast<void*>(f_factor_buffer<kIlu>)},
      {"cusparseDcsrilu02_bufferSize", reinterpret_cast<void*>(f_factor_buffer<kIlu>)},
      {"cusparseScsrilu02_analysis", reinterpret_cast<void*>(f_factor_analysis<kIlu>)},
      {"cusparseDcsrilu02_analysis", reinterpret_cast<void*>(f_factor_analysis<kIlu>)},
      {"cusparseScsrilu02", reinterpret_cast<void*>(f_factor<kIlu, kR32F>)},
      {"cusparseDcsrilu02", reinterpret_cast<void*>(f_factor<kIlu, kR64F>)},
      {"cusparseScsrilu02_numericBoost", reinterpret_cast<void*>(f_ilu_boost<kR32F>)},
      {"cusparseDcsrilu02_numericBoost", reinterpret_cast<void*>(f_ilu_boost<kR64F>)},
      {"cusparseXcsrilu02_zeroPivot", reinterpret_cast<void*>(f_zero_pivot<kIlu>)},
      {"cusparseScsric02_bufferSize", reinterpret_cast<void*>(f_factor_buffer<kIc>)},
      {"cusparseDcsric02_bufferSize", reinterpret_cast<void*>(f_factor_buffer<kIc>)},
      {"cusparseScsric02_analysis", reinterpret_cast<void*>(f_factor_analysis<kIc>)},
      {"cusparseDcsric02_analysis", reinterpret_cast<void*>(f_factor_analysis<kIc>)},
      {"cusparseScsric02", reinterpret_cast<void*>(f_factor<kIc, kR32F>)},
      {"cusparseDcsric02", reinterpret_cast<void*>(f_factor<kIc, kR64F>)},
      {"cusparseXcsric02_zeroPivot", reinterpret_cast<void*>(f_zero_pivot<kIc>)},
      {"cusparseSgtsv2_bufferSizeExt", reinterpret_cast<void*>(f_gtsv_buffer)},
      {"cusparseDgtsv2_bufferSizeExt", reinterpret_cast<void*>(f_gtsv_buffer)},
      {"cusparseSgtsv2_nopivot_bufferSizeExt", reinterpret_cast<void*>(f_gtsv_buffer)},
      {"cusparseDgtsv2_nopivot_bufferSizeExt", reinterpret_cast<void*>(f_gtsv_buffer)},
      {"cusparseSgtsv2", reinterpret_cast<void*>(f_gtsv<kR32F>)},
      {"cusparseDgtsv2", reinterpret_cast<void*>(f_gtsv<kR64F>)},
      {"cusparseSgtsv2_nopivot", reinterpret_cast<void*>(f_gtsv<kR32F>)},
      {"cusparseDgtsv2_nopivot", reinterpret_cast<void*>(f_gtsv<kR64F>)},
      {"cusparseSgtsv2StridedBatch_bufferSizeExt", reinterpret_cast<void*>(f_gtsv_batch_buffer)},
      {"cusparseDgtsv2StridedBatch_bufferSizeExt", reinterpret_cast<void*>(f_gtsv_batch_buffer)},
      {"cusparseSgtsv2StridedBatch", reinterpret_cast<void*>(f_gtsv_batch<kR32F>)},
      {"cusparseDgtsv2StridedBatch", reinterpret_cast<void*>(f_gtsv_batch<kR64F>)},
      {"cusparseXcoosort_bufferSizeExt", reinterpret_cast<void*>(f_sort_buffer)},
      {"cusparseXcoosortByRow", reinterpret_cast<void*>(f_coosort<true>)},
      {"cusparseXcoosortByColumn", reinterpret_cast<void*>(f_coosort<false>)},
      {"cusparseXcsrsort_bufferSizeExt", reinterpret_cast<void*>(f_sort_buffer)},
      {"cusparseXcsrsort", reinterpret_cast<void*>(f_csrsort)},
      {"cusparseCreateIdentityPermutation", reinterpret_cast<void*>(f_identity)},
      {"cusparseXcoo2csr", reinterpret_cast<void*>(f_coo2csr)},
      {"cusparseXcsr2coo", reinterpret_cast<void*>(f_csr2coo)},
      {"cusparseCsr2cscEx2_bufferSize", reinterpret_cast<void*>(f_csr2csc_buffer)},
      {"cusparseCsr2cscEx2", reinterpret_cast<void*>(f_csr2csc)},
      // the legacy calls of every value type, sorts by column, geam, interleaved batches
      {"cusparseXcscsort_bufferSizeExt", reinterpret_cast<void*>(f_sort_buffer)},
      {"cusparseXcscsort", reinterpret_cast<void*>(f_cscsort)},
      {"cusparseXcsrgeam2Nnz", reinterpret_cast<void*>(f_geam_nnz)},
      {"cusparseSnnz", reinterpret_cast<void*>(f_nnz<float>)},
      {"cusparseScsrgeam2_bufferSizeExt", reinterpret_cast<void*>(f_geam_buffer)},
      {"cusparseScsrgeam2", reinterpret_cast<void*>(f_geam<float>)},
      {"cusparseSgtsvInterleavedBatch_bufferSizeExt", reinterpret_cast<void*>(f_interleaved_buffer)},
      {"cusparseSgtsvInterleavedBatch", reinterpret_cast<void*>(f_gtsv_interleaved<float>)},
      {"cusparseSgpsvInterleavedBatch_bufferSizeExt", reinterpret_cast<void*>(f_gpsv_buffer)},
      {"cusparseSgpsvInterleavedBatch", reinterpret_cast<void*>(f_gpsv_interleaved<float>)},
      {"cusparseDnnz", reinterpret_cast<void*>(f_nnz<double>)},
      {"cusparseDcsrgeam2_bufferSizeExt", reinterpret_cast<void*>(f_geam_buffer)},
      {"cusparseDcsrgeam2", reinterpret_cast<void*>(f_geam<double>)},
      {"cusparseDgtsvInterleavedBatch_bufferSizeExt", reinterpret_cast<void*>(f_interleaved_buffer)},
      {"cusparseDgtsvInterleavedBatch", reinterpret_cast<void*>(f_gtsv_interleaved<double>)},
      {"cusparseDgpsvInterleavedBatch_bufferSizeExt", reinterpret_cast<void*>(f_gpsv_buffer)},
      {"cusparseDgpsvInterleavedBatch", reinterpret_cast<void*>(f_gpsv_interleaved<double>)},
      {"cusparseCnnz", reinterpret_cast<void*>(f_nnz<std::complex<float>>)},
      {"cusparseCcsrgeam2_bufferSizeExt", reinterpret_cast<void*>(f_geam_buffer)},
      {"cusparseCcsrgeam2", reinterpret_cast<void*>(f_geam<std::complex<float>>)},
      {"cusparseCgtsvInterleavedBatch_bufferSizeExt", reinterpret_cast<void*>(f_interleaved_buffer)},
      {"cusparseCgtsvInterleavedBatch", reinterpret_cast<void*>(f_gtsv_interleaved<std::complex<float>>)},
      {"cusparseCgpsvInterleavedBatch_bufferSizeExt", reinterpret_cast<void*>(f_gpsv_buffer)},
      {"cusparseCgpsvInterleavedBatch", reinterpret_cast<void*>(f_gpsv_interleaved<std::complex<float>>)},
      {"cusparseZnnz", reinterpret_cast<void*>(f_nnz<std::complex<double>>)},
      {"cusparseZcsrgeam2_bufferSizeExt", reinterpret_cast<void*>(f_geam_buffer)},
      {"cusparseZcsrgeam2", reinterpret_cast<void*>(f_geam<std::complex<double>>)},
      {"cusparseZgtsvInterleavedBatch_bufferSizeExt", reinterpret_cast<void*>(f_interleaved_buffer)},
      {"cusparseZgtsvInterleavedBatch", reinterpret_cast<void*>(f_gtsv_interleaved<std::complex<double>>)},
      {"cusparseZgpsvInterleavedBatch_bufferSizeExt", reinterpret_cast<void*>(f_gpsv_buffer)},
      {"cusparseZgpsvInterleavedBatch", reinterpret_cast<void*>(f_gpsv_interleaved<std::complex<double>>)},
      {"cusparseCgtsv2_bufferSizeExt", reinterpret_cast<void*>(f_gtsv_buffer)},
      {"cusparseCgtsv2_nopivot_bufferSizeExt", reinterpret_cast<void*>(f_gtsv_buffer)},
      {"cusparseCgtsv2", reinterpret_cast<void*>(f_gtsv_v<std::complex<float>>)},
      {"cusparseCgtsv2_nopivot", reinterpret_cast<void*>(f_gtsv_v<std::complex<float>>)},
      {"cusparseCgtsv2StridedBatch_bufferSizeExt", reinterpret_cast<void*>(f_gtsv_batch_buffer)},
      {"cusparseCgtsv2StridedBatch", reinterpret_cast<void*>(f_gtsv_stride_v<std::complex<float>>)},
      {"cusparseZgtsv2_bufferSizeExt", reinterpret_cast<void*>(f_gtsv_buffer)},
      {"cusparseZgtsv2_nopivot_bufferSizeExt", reinterpret_cast<void*>(f_gtsv_buffer)},
      {"cusparseZgtsv2", reinterpret_cast<void*>(f_gtsv_v<std::complex<double>>)},
      {"cusparseZgtsv2_nopivot", reinterpret_cast<void*>(f_gtsv_v<std::complex<double>>)},
      {"cusparseZgtsv2StridedBatch_bufferSizeExt", reinterpret_cast<void*>(f_gtsv_batch_buffer)},
      {"cusparseZgtsv2StridedBatch", reinterpret_cast<void*>(f_gtsv_stride_v<std::complex<double>>)},
      {"cusparseCreateColorInfo", reinterpret_cast<void*>(f_create_info<kColorInfo>)},
      {"cusparseDestroyColorInfo", reinterpret_cast<void*>(f_destroy_info<kColorInfo>)},
      {"cusparseScsrcolor", reinterpret_cast<void*>(f_csrcolor<float>)},
      {"cusparseDcsrcolor", reinterpret_cast<void*>(f_csrcolor<double>)},
      {"cusparseCcsrcolor", reinterpret_cast<void*>(f_csrcolor<float>)},
      {"cusparseZcsrcolor", reinterpret_cast<void*>(f_csrcolor<double>)},
      // BSR and pruning
      {"cusparseCreateBsrilu02Info", reinterpret_cast<void*>(f_create_info<kBsrilu>)},
      {"cusparseDestroyBsrilu02Info", reinterpret_cast<void*>(f_destroy_info<kBsrilu>)},
      {"cusparseXbsrilu02_zeroPivot", reinterpret_cast<void*>(f_zero_pivot<kBsrilu>)},
      {"cusparseSbsrilu02_bufferSize", reinterpret_cast<void*>(f_bsr_factor_buffer<kBsrilu>)},
      {"cusparseSbsrilu02_analysis", reinterpret_cast<void*>(f_bsr_factor_analysis<kBsrilu>)},
      {"cusparseSbsrilu02", reinterpret_cast<void*>(f_bsr_factor<float, kBsrilu>)},
      {"cusparseSbsrilu02_numericBoost", reinterpret_cast<void*>(f_boost<float, kBsrilu>)},
      {"cusparseDbsrilu02_bufferSize", reinterpret_cast<void*>(f_bsr_factor_buffer<kBsrilu>)},
      {"cusparseDbsrilu02_analysis", reinterpret_cast<void*>(f_bsr_factor_analysis<kBsrilu>)},
      {"cusparseDbsrilu02", reinterpret_cast<void*>(f_bsr_factor<double, kBsrilu>)},
      {"cusparseDbsrilu02_numericBoost", reinterpret_cast<void*>(f_boost<double, kBsrilu>)},
      {"cusparseCbsrilu02_bufferSize", reinterpret_cast<void*>(f_bsr_factor_buffer<kBsrilu>)},
      {"cusparseCbsrilu02_analysis", reinterpret_cast<void*>(f_bsr_factor_analysis<kBsrilu>)},
      {"cusparseCbsrilu02", reinterpret_cast<void*>(f_bsr_factor<std::complex<float>, kBsrilu>)},
      {"cusparseCbsrilu02_numericBoost", reinterpret_cast<void*>(f_boost<std::complex<float>, kBsrilu>)},
      {"cusparseZbsrilu02_bufferSize", reinterpret_cast<void*>(f_bsr_factor_buffer<kBsrilu>)},
      {"cusparseZbsrilu02_analysis", reinterpret_cast<void*>(f_bsr_factor_analysis<kBsrilu>)},
      {"cusparseZbsrilu02", reinterpret_cast<void*>(f_bsr_factor<std::complex<double>, kBsrilu>)},
      {"cusparseZbsrilu02_numericBoost", reinterpret_cast<void*>(f_boost<std::complex<double>, kBsrilu>)},
      {"cusparseCcsrilu02_bufferSize", reinterpret_cast<void*>(f_factor_buffer<kIlu>)},
      {"cusparseCcsrilu02_analysis", reinterpret_cast<void*>(f_factor_analysis<kIlu>)},
      {"cusparseCcsrilu02", reinterpret_cast<void*>(f_csr_factor<std::complex<float>, kIlu>)},
      {"cusparseCcsrilu02_numericBoost", reinterpret_cast<void*>(f_boost<std::complex<float>, kIlu>)},
      {"cusparseCcsric02_bufferSize", reinterpret_cast<void*>(f_factor_buffer<kIc>)},
      {"cusparseCcsric02_analysis", reinterpret_cast<void*>(f_factor_analysis<kIc>)},
      {"cusparseCcsric02", reinterpret_cast<void*>(f_csr_factor<std::complex<float>, kIc>)},
      {"cusparseZcsrilu02_bufferSize", reinterpret_cast<void*>(f_factor_buffer<kIlu>)},
      {"cusparseZcsrilu02_analysis", reinterpret_cast<void*>(f_factor_analysis<kIlu>)},
      {"cusparseZcsrilu02", reinterpret_cast<void*>(f_csr_factor<std::complex<double>, kIlu>)},
      {"cusparseZcsrilu02_numericBoost", reinterpret_cast<void*>(f_boost<std::complex<double>, kIlu>)},
      {"cusparseZcsric02_bufferSize", reinterpret_cast<void*>(f_factor_buffer<kIc>)},
      {"cusparseZcsric02_analysis", reinterpret_cast<void*>(f_factor_analysis<kIc>)},
      {"cusparseZcsric02", reinterpret_cast<void*>(f_csr_factor<std::complex<double>, kIc>)},
      {"cusparseCreateBsrsv2Info", reinterpret_cast<void*>(f_create_info<kBsrsv>)},
      {"cusparseDestroyBsrsv2Info", reinterpret_cast<void*>(f_destroy_info<kBsrsv>)},
      {"cusparseCreateBsrsm2Info", reinterpret_cast<void*>(f_create_info<kBsrsm>)},
      {"cusparseDestroyBsrsm2Info", reinterpret_cast<void*>(f_destroy_info<kBsrsm>)},
      {"cusparseCreateBsric02Info", reinterpret_cast<void*>(f_create_info<kBsric>)},
      {"cusparseDestroyBsric02Info", reinterpret_cast<void*>(f_destroy_info<kBsric>)},
      {"cusparseCreatePruneInfo", reinterpret_cast<void*>(f_create_info<kPrune>)},
      {"cusparseDestroyPruneInfo", reinterpret_cast<void*>(f_destroy_info<kPrune>)},
      {"cusparseXbsrsv2_zeroPivot", reinterpret_cast<void*>(f_zero_pivot<kBsrsv>)},
      {"cusparseXbsrsm2_zeroPivot", reinterpret_cast<void*>(f_zero_pivot<kBsrsm>)},
      {"cusparseXbsric02_zeroPivot", reinterpret_cast<void*>(f_zero_pivot<kBsric>)},
      {"cusparseSbsrmv", reinterpret_cast<void*>(f_bsrmv<float>)},
      {"cusparseSbsrxmv", reinterpret_cast<void*>(f_bsrxmv<float>)},
      {"cusparseSbsrmm", reinterpret_cast<void*>(f_bsrmm<float>)},
      {"cusparseSbsrsv2_bufferSize", reinterpret_cast<void*>(f_bsrsv_buffer)},
      {"cusparseSbsrsv2_analysis", reinterpret_cast<void*>(f_bsrsv_analysis)},
      {"cusparseSbsrsv2_solve", reinterpret_cast<void*>(f_bsrsv_solve<float>)},
      {"cusparseSbsrsm2_bufferSize", reinterpret_cast<void*>(f_bsrsm_buffer)},
      {"cusparseSbsrsm2_analysis", reinterpret_cast<void*>(f_bsrsm_analysis)},
      {"cusparseSbsrsm2_solve", reinterpret_cast<void*>(f_bsrsm_solve<float>)},
      {"cusparseSbsric02_bufferSize", reinterpret_cast<void*>(f_bsr_factor_buffer<kBsric>)},
      {"cusparseSbsric02_analysis", reinterpret_cast<void*>(f_bsr_factor_analysis<kBsric>)},
      {"cusparseSbsric02", reinterpret_cast<void*>(f_bsr_factor<float, kBsric>)},
      {"cusparseDbsrmv", reinterpret_cast<void*>(f_bsrmv<double>)},
      {"cusparseDbsrxmv", reinterpret_cast<void*>(f_bsrxmv<double>)},
      {"cusparseDbsrmm", reinterpret_cast<void*>(f_bsrmm<double>)},
      {"cusparseDbsrsv2_bufferSize", reinterpret_cast<void*>(f_bsrsv_buffer)},
      {"cusparseDbsrsv2_analysis", reinterpret_cast<void*>(f_bsrsv_analysis)},
      {"cusparseDbsrsv2_solve", reinterpret_cast<void*>(f_bsrsv_solve<double>)},
      {"cusparseDbsrsm2_bufferSize", reinterpret_cast<void*>(f_bsrsm_buffer)},
      {"cusparseDbsrsm2_analysis", reinterpret_cast<void*>(f_bsrsm_analysis)},
      {"cusparseDbsrsm2_solve", reinterpret_cast<void*>(f_bsrsm_solve<double>)},
      {"cusparseDbsric02_bufferSize", reinterpret_cast<void*>(f_bsr_factor_buffer<kBsric>)},
      {"cusparseDbsric02_analysis", reinterpret_cast<void*>(f_bsr_factor_analysis<kBsric>)},
      {"cusparseDbsric02", reinterpret_cast<void*>(f_bsr_factor<double, kBsric>)},
      {"cusparseCbsrmv", reinterpret_cast<void*>(f_bsrmv<std::complex<float>>)},
      {"cusparseCbsrxmv", reinterpret_cast<void*>(f_bsrxmv<std::complex<float>>)},
      {"cusparseCbsrmm", reinterpret_cast<void*>(f_bsrmm<std::complex<float>>)},
      {"cusparseCbsrsv2_bufferSize", reinterpret_cast<void*>(f_bsrsv_buffer)},
      {"cusparseCbsrsv2_analysis", reinterpret_cast<void*>(f_bsrsv_analysis)},
      {"cusparseCbsrsv2_solve", reinterpret_cast<void*>(f_bsrsv_solve<std::complex<float>>)},
      {"cusparseCbsrsm2_bufferSize", reinterpret_cast<void*>(f_bsrsm_buffer)},
      {"cusparseCbsrsm2_analysis", reinterpret_cast<void*>(f_bsrsm_analysis)},
      {"cusparseCbsrsm2_solve", reinterpret_cast<void*>(f_bsrsm_solve<std::complex<float>>)},
      {"cusparseCbsric02_bufferSize", reinterpret_cast<void*>(f_bsr_factor_buffer<kBsric>)},
      {"cusparseCbsric02_analysis", reinterpret_cast<void*>(f_bsr_factor_analysis<kBsric>)},
      {"cusparseCbsric02", reinterpret_cast<void*>(f_bsr_factor<std::complex<float>, kBsric>)},
      {"cusparseZbsrmv", reinterpret_cast<void*>(f_bsrmv<std::complex<double>>)},
      {"cusparseZbsrxmv", reinterpret_cast<void*>(f_bsrxmv<std::complex<double>>)},
      {"cusparseZbsrmm", reinterpret_cast<void*>(f_bsrmm<std::complex<double>>)},
      {"cusparseZbsrsv2_bufferSize", reinterpret_cast<void*>(f_bsrsv_buffer)},
      {"cusparseZbsrsv2_analysis", reinterpret_cast<void*>(f_bsrsv_analysis)},
      {"cusparseZbsrsv2_solve", reinterpret_cast<void*>(f_bsrsv_solve<std::complex<double>>)},
      {"cusparseZbsrsm2_bufferSize", reinterpret_cast<void*>(f_bsrsm_buffer)},
      {"cusparseZbsrsm2_analysis", reinterpret_cast<void*>(f_bsrsm_analysis)},
      {"cusparseZbsrsm2_solve", reinterpret_cast<void*>(f_bsrsm_solve<std::complex<double>>)},
      {"cusparseZbsric02_bufferSize", reinterpret_cast<void*>(f_bsr_factor_buffer<kBsric>)},
      {"cusparseZbsric02_analysis", reinterpret_cast<void*>(f_bsr_factor_analysis<kBsric>)},
      {"cusparseZbsric02", reinterpret_cast<void*>(f_bsr_factor<std::complex<double>, kBsric>)},
      {"cusparseHpruneDense2csr_bufferSizeExt", reinterpret_cast<void*>(f_prune_buffer_dense)},
      {"cusparseHpruneDense2csrNnz", reinterpret_cast<void*>(f_prune_dense_nnz<Half>)},
      {"cusparseHpruneDense2csr", reinterpret_cast<void*>(f_prune_dense<Half>)},
      {"cusparseHpruneCsr2csr_bufferSizeExt", reinterpret_cast<void*>(f_prune_buffer_csr)},
      {"cusparseHpruneCsr2csrNnz", reinterpret_cast<void*>(f_prune_csr_nnz<Half>)},
      {"cusparseHpruneCsr2csr", reinterpret_cast<void*>(f_prune_csr<Half>)},
      {"cusparseHpruneDense2csrByPercentage_bufferSizeExt", reinterpret_cast<void*>(f_prune_buffer_dense_pct)},
      {"cusparseHpruneDense2csrNnzByPercentage", reinterpret_cast<void*>(f_prune_dense_nnz_pct<Half>)},
      {"cusparseHpruneDense2csrByPercentage", reinterpret_cast<void*>(f_prune_dense_pct<Half>)},
      {"cusparseHpruneCsr2csrByPercentage_bufferSizeExt", reinterpret_cast<void*>(f_prune_buffer_csr_pct)},
      {"cusparseHpruneCsr2csrNnzByPercentage", reinterpret_cast<void*>(f_prune_csr_nnz_pct<Half>)},
      {"cusparseHpruneCsr2csrByPercentage", reinterpret_cast<void*>(f_prune_csr_pct<Half>)},
      {"cusparseSpruneDense2csr_bufferSizeExt", reinterpret_cast<void*>(f_prune_buffer_dense)},
      {"cusparseSpruneDense2csrNnz", reinterpret_cast<void*>(f_prune_dense_nnz<float>)},
      {"cusparseSpruneDense2csr", reinterpret_cast<void*>(f_prune_dense<float>)},
      {"cusparseSpruneCsr2csr_bufferSizeExt", reinterpret_cast<void*>(f_prune_buffer_csr)},
      {"cusparseSpruneCsr2csrNnz", reinterpret_cast<void*>(f_prune_csr_nnz<float>)},
      {"cusparseSpruneCsr2csr", reinterpret_cast<void*>(f_prune_csr<float>)},
      {"cusparseSpruneDense2csrByPercentage_bufferSizeExt", reinterpret_cast<void*>(f_prune_buffer_dense_pct)},
      {"cusparseSpruneDense2csrNnzByPercentage", reinterpret_cast<void*>(f_prune_dense_nnz_pct<float>)},
      {"cusparseSpruneDense2csrByPercentage", reinterpret_cast<void*>(f_prune_dense_pct<float>)},
      {"cusparseSpruneCsr2csrByPercentage_bufferSizeExt", reinterpret_cast<void*>(f_prune_buffer_csr_pct)},
      {"cusparseSpruneCsr2csrNnzByPercentage", reinterpret_cast<void*>(f_prune_csr_nnz_pct<float>)},
      {"cusparseSpruneCsr2csrByPercentage", reinterpret_cast<void*>(f_prune_csr_pct<float>)},
      {"cusparseDpruneDense2csr_bufferSizeExt", reinterpret_cast<void*>(f_prune_buffer_dense)},
      {"cusparseDpruneDense2csrNnz", reinterpret_cast<void*>(f_prune_dense_nnz<double>)},
      {"cusparseDpruneDense2csr", reinterpret_cast<void*>(f_prune_dense<double>)},
      {"cusparseDpruneCsr2csr_bufferSizeExt", reinterpret_cast<void*>(f_prune_buffer_csr)},
      {"cusparseDpruneCsr2csrNnz", reinterpret_cast<void*>(f_prune_csr_nnz<double>)},
      {"cusparseDpruneCsr2csr", reinterpret_cast<void*>(f_prune_csr<double>)},
      {"cusparseDpruneDense2csrByPercentage_bufferSizeExt", reinterpret_cast<void*>(f_prune_buffer_dense_pct)},
      {"cusparseDpruneDense2csrNnzByPercentage", reinterpret_cast<void*>(f_prune_dense_nnz_pct<double>)},
      {"cusparseDpruneDense2csrByPercentage", reinterpret_cast<void*>(f_prune_dense_pct<double>)},
      {"cusparseDpruneCsr2csrByPercentage_bufferSizeExt", reinterpret_cast<void*>(f_prune_buffer_csr_pct)},
      {"cusparseDpruneCsr2csrNnzByPercentage", reinterpret_cast<void*>(f_prune_csr_nnz_pct<double>)},
      {"cusparseDpruneCsr2csrByPercentage", reinterpret_cast<void*>(f_prune_csr_pct<double>)},
  };
  auto it = t.find(name);
  return it == t.end() ? nullptr : it->second;
}

uint64_t fake_live_cusparse_objects() {
  std::lock_guard l(g_mu);
  return g_live.size();
}

}  // namespace vmcuda::testing
