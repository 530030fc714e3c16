// A fake libcusparse.so.12 for the test executor (fake_driver.h): handles (stream, pointer mode,
// version), the generic API's CSR/COO sparse matrices and dense vectors/matrices (the getters and
// setters vmcuda remotes) and SpMV/SpMM, SpSV (CSR triangular solve, after an analysis) and
// SpGEMM (CSR x CSR, the product kept in its descriptor from compute to copy) computed on the
// CPU over the fake device memory for fp32 and fp64 values with 32- or 64-bit indices. A FAKE: only what the tests need; other entry
// points are missing (the stub answers CUSPARSE_STATUS_NOT_SUPPORTED). Memory no allocation holds
// is CUSPARSE_STATUS_EXECUTION_FAILED (a GPU would fault).
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
  };
  auto it = t.find(name);
  return it == t.end() ? nullptr : it->second;
}

uint64_t fake_live_cusparse_objects() {
  std::lock_guard l(g_mu);
  return g_live.size();
}

}  // namespace vmcuda::testing
