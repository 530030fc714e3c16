// A fake libcusparse.so.12 for the test executor (fake_driver.h): handles (stream, pointer mode,
// version), the generic API's CSR/COO sparse matrices and dense vectors/matrices (the getters and
// setters vmcuda remotes) and SpMV/SpMM, SpSV (CSR triangular solve, after an analysis) and
// SpGEMM (CSR x CSR, the product kept in its descriptor from compute to copy) computed on the
// CPU over the fake device memory for fp32 and fp64 values with 32- or 64-bit indices, and of the
// legacy API: matrix descriptors, csrilu02/csric02 (ILU(0), IC(0), zero pivots, numeric boost),
// gtsv2 (tridiagonal solves), COO/CSR sorts and index conversions, csr2cscEx2 (fp32/fp64, 32-bit
// indices). A FAKE: only what the tests need; other entry
// points are missing (the stub answers CUSPARSE_STATUS_NOT_SUPPORTED). Memory no allocation holds
// is CUSPARSE_STATUS_EXECUTION_FAILED (a GPU would fault).
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
  bool boost = false;
  double tol = 0, boost_val = 0;
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
  };
  auto it = t.find(name);
  return it == t.end() ? nullptr : it->second;
}

uint64_t fake_live_cusparse_objects() {
  std::lock_guard l(g_mu);
  return g_live.size();
}

}  // namespace vmcuda::testing
