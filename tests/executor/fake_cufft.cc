// A fake libcufft.so.12 for the test executor (fake_driver.h): plans of one-dimensional C2C, R2C
// and C2R transforms (batched, contiguous, out of place or in place) computed on the CPU by a
// naive DFT in double precision over the fake device memory, so that CI checks real numbers of
// cuFFT calls that went through the guest library, the wire and the stub. Sizes and types are
// checked as cuFFT documents (CUFFT_INVALID_SIZE, CUFFT_INVALID_TYPE); memory no allocation
// holds is CUFFT_EXEC_FAILED (a GPU would fault). cufftXtMakePlanMany/cufftXtExec of those types
// in single precision too. Other ranks and Z2Z/D2Z/Z2D answer
// CUFFT_NOT_SUPPORTED: the GPU run checks those.
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "executor/fake_driver.h"

namespace vmcuda::testing {
namespace {

constexpr int kSuccess = 0, kInvalidPlan = 1, kInvalidType = 3, kInvalidValue = 4, kExecFailed = 6,
              kInvalidSize = 8, kNotSupported = 16;
constexpr int kR2C = 0x2a, kC2R = 0x2c, kC2C = 0x29;

struct Plan {
  int nx = 0, type = 0, batch = 0;  // nx 0: not made yet
  void* stream = nullptr;
  uint64_t work_area = 0;
  int auto_allocation = 1;
};
std::mutex g_mu;
std::map<int, Plan> g_plans;
int g_last = 0;

Plan* live(int plan) {
  auto it = g_plans.find(plan);
  return it == g_plans.end() ? nullptr : &it->second;
}
// A fake work area: 8 bytes per complex element of one transform (what a real plan might need).
size_t work_bytes(int nx, int batch) { return size_t(nx) * 8 * (batch > 0 ? 1 : 0); }
int check(int nx, int type, int batch) {
  if (type != kR2C && type != kC2R && type != kC2C) return kInvalidType;
  if (nx < 2 || batch < 1) return kInvalidSize;  // cuFFT: nx >= 2 (1 for C2C in newer releases)
  return kSuccess;
}
int make(Plan& p, int nx, int type, int batch, size_t* work) {
  if (int s = check(nx, type, batch)) return s;
  p.nx = nx, p.type = type, p.batch = batch;
  if (work) *work = work_bytes(nx, batch);
  return kSuccess;
}

// ---- the entry points (NVIDIA's signatures, ABI types)

int f_create(int* plan) {
  if (!plan) return kInvalidValue;
  std::lock_guard l(g_mu);
  g_plans[++g_last] = Plan{};
  *plan = g_last;
  return kSuccess;
}
int f_destroy(int plan) {
  std::lock_guard l(g_mu);
  return g_plans.erase(plan) ? kSuccess : kInvalidPlan;
}
int f_make_plan_1d(int plan, int nx, int type, int batch, size_t* work) {
  std::lock_guard l(g_mu);
  Plan* p = live(plan);
  if (!p) return kInvalidPlan;
  return make(*p, nx, type, batch, work);
}
int f_plan_1d(int* plan, int nx, int type, int batch) {
  if (!plan) return kInvalidValue;
  if (int s = check(nx, type, batch)) return s;
  int made;
  f_create(&made);
  f_make_plan_1d(made, nx, type, batch, nullptr);
  *plan = made;
  return kSuccess;
}
// Rank 1 with the default (contiguous) layout only.
int f_make_plan_many(int plan, int rank, int* n, int* inembed, int, int, int* onembed, int, int, int type, int batch,
                     size_t* work) {
  if (rank != 1 || !n) return kNotSupported;
  if (inembed || onembed) return kNotSupported;
  return f_make_plan_1d(plan, n[0], type, batch, work);
}
int f_plan_many(int* plan, int rank, int* n, int* inembed, int istride, int idist, int* onembed, int ostride, int odist,
                int type, int batch) {
  if (!plan) return kInvalidValue;
  int made;
  f_create(&made);
  if (int s = f_make_plan_many(made, rank, n, inembed, istride, idist, onembed, ostride, odist, type, batch, nullptr)) {
    f_destroy(made);
    return s;
  }
  *plan = made;
  return kSuccess;
}
int f_get_size(int plan, size_t* work) {
  std::lock_guard l(g_mu);
  Plan* p = live(plan);
  if (!p) return kInvalidPlan;
  if (!work) return kInvalidValue;
  *work = work_bytes(p->nx, p->batch);
  return kSuccess;
}
int f_estimate_1d(int nx, int type, int batch, size_t* work) {
  if (int s = check(nx, type, batch)) return s;
  if (!work) return kInvalidValue;
  *work = work_bytes(nx, batch);
  return kSuccess;
}
int f_set_stream(int plan, void* stream) {
  std::lock_guard l(g_mu);
  Plan* p = live(plan);
  if (!p) return kInvalidPlan;
  p->stream = stream;
  return kSuccess;
}
int f_set_work_area(int plan, void* area) {
  std::lock_guard l(g_mu);
  Plan* p = live(plan);
  if (!p) return kInvalidPlan;
  p->work_area = reinterpret_cast<uint64_t>(area);
  return kSuccess;
}
int f_set_auto_allocation(int plan, int on) {
  std::lock_guard l(g_mu);
  Plan* p = live(plan);
  if (!p) return kInvalidPlan;
  p->auto_allocation = on;
  return kSuccess;
}

// out[k] = sum_j in[j] e^(sign 2 pi i j k / n), in double.
void dft(const std::vector<std::complex<double>>& in, std::vector<std::complex<double>>& out, int sign) {
  const size_t n = in.size();
  out.assign(n, {});
  for (size_t k = 0; k < n; ++k) {
    std::complex<double> s{};
    for (size_t j = 0; j < n; ++j) {
      const double a = sign * 2.0 * M_PI * double((j * k) % n) / double(n);
      s += in[j] * std::complex<double>(std::cos(a), std::sin(a));
    }
    out[k] = s;
  }
}

int exec(int plan, const void* idata, void* odata, int want_type, int direction) {
  Plan p;
  {
    std::lock_guard l(g_mu);
    Plan* q = live(plan);
    if (!q) return kInvalidPlan;
    p = *q;
  }
  if (p.nx == 0) return kInvalidPlan;  // created, never made
  if (p.type != want_type) return kInvalidType;
  if (want_type == kC2C && direction != -1 && direction != 1) return kInvalidValue;
  if (!p.auto_allocation && !p.work_area) return 13;  // CUFFT_NO_WORKSPACE
  const size_t n = size_t(p.nx), half = n / 2 + 1;
  const bool in_place = idata == odata;
  // Elements per transform in memory: an in-place real side is padded to 2 (n/2 + 1) reals.
  const size_t real_dist = in_place ? 2 * half : n;
  const size_t in_elems = want_type == kC2C ? n : want_type == kR2C ? real_dist : half;
  const size_t out_elems = want_type == kC2C ? n : want_type == kR2C ? half : real_dist;
  const size_t in_bytes = (want_type == kR2C ? 4 : 8) * in_elems, out_bytes = (want_type == kC2R ? 4 : 8) * out_elems;
  int status = kSuccess;
  fake_device_access([&](const FakeDeviceAt& at) {
    const std::byte* in = at(reinterpret_cast<uint64_t>(idata), in_bytes * p.batch);
    std::byte* out = at(reinterpret_cast<uint64_t>(odata), out_bytes * p.batch);
    if (!in || !out) {
      status = kExecFailed;
      return;
    }
    std::vector<std::complex<double>> x(n), y;
    for (int b = 0; b < p.batch; ++b) {
      const std::byte* src = in + in_bytes * b;
      std::byte* dst = out + out_bytes * b;
      float f[2];
      for (size_t j = 0; j < n; ++j) {
        if (want_type == kR2C) {
          std::memcpy(f, src + 4 * j, 4);
          x[j] = {f[0], 0};
        } else if (want_type == kC2C) {
          std::memcpy(f, src + 8 * j, 8);
          x[j] = {f[0], f[1]};
        } else {  // C2R: the Hermitian half, the rest its conjugate mirror
          const size_t k = j < half ? j : n - j;
          std::memcpy(f, src + 8 * k, 8);
          x[j] = j < half ? std::complex<double>(f[0], f[1]) : std::complex<double>(f[0], -f[1]);
        }
      }
      dft(x, y, want_type == kC2C ? direction : want_type == kR2C ? -1 : 1);
      for (size_t k = 0; k < (want_type == kR2C ? half : n); ++k) {
        if (want_type == kC2R) {
          const float v = float(y[k].real());
          std::memcpy(dst + 4 * k, &v, 4);
        } else {
          const float v[2] = {float(y[k].real()), float(y[k].imag())};
          std::memcpy(dst + 8 * k, v, 8);
        }
      }
    }
  });
  return status;
}
int f_exec_c2c(int plan, void* i, void* o, int direction) { return exec(plan, i, o, kC2C, direction); }
// cufftXt's plans (PyTorch's): single-precision real or complex data (cudaDataType CUDA_R_32F 0,
// CUDA_C_32F 4) as the three transform types.
int f_xt_make_plan_many(int plan, int rank, long long* n, long long* inembed, long long, long long, int itype,
                        long long* onembed, long long, long long, int otype, long long batch, size_t* work,
                        int etype) {
  if (rank != 1 || !n || inembed || onembed || etype != 4) return kNotSupported;
  const int type = itype == 0 && otype == 4 ? kR2C : itype == 4 && otype == 0 ? kC2R : itype == 4 && otype == 4 ? kC2C : 0;
  if (!type) return kNotSupported;
  if (n[0] > INT32_MAX || batch > INT32_MAX) return kInvalidSize;
  return f_make_plan_1d(plan, int(n[0]), type, int(batch), work);
}
int f_xt_exec(int plan, void* i, void* o, int direction) {
  int type;
  {
    std::lock_guard l(g_mu);
    Plan* p = live(plan);
    if (!p) return kInvalidPlan;
    type = p->type;
  }
  return exec(plan, i, o, type, type == kC2C ? direction : type == kR2C ? -1 : 1);
}
int f_exec_r2c(int plan, void* i, void* o) { return exec(plan, i, o, kR2C, -1); }
int f_exec_c2r(int plan, void* i, void* o) { return exec(plan, i, o, kC2R, 1); }

}  // namespace

void* fake_cufft_symbol(const char* name) {
  static const std::map<std::string, void*> t = {
      {"cufftCreate", reinterpret_cast<void*>(f_create)},
      {"cufftDestroy", reinterpret_cast<void*>(f_destroy)},
      {"cufftPlan1d", reinterpret_cast<void*>(f_plan_1d)},
      {"cufftPlanMany", reinterpret_cast<void*>(f_plan_many)},
      {"cufftMakePlan1d", reinterpret_cast<void*>(f_make_plan_1d)},
      {"cufftMakePlanMany", reinterpret_cast<void*>(f_make_plan_many)},
      {"cufftGetSize", reinterpret_cast<void*>(f_get_size)},
      {"cufftEstimate1d", reinterpret_cast<void*>(f_estimate_1d)},
      {"cufftSetStream", reinterpret_cast<void*>(f_set_stream)},
      {"cufftSetWorkArea", reinterpret_cast<void*>(f_set_work_area)},
      {"cufftSetAutoAllocation", reinterpret_cast<void*>(f_set_auto_allocation)},
      {"cufftExecC2C", reinterpret_cast<void*>(f_exec_c2c)},
      {"cufftExecR2C", reinterpret_cast<void*>(f_exec_r2c)},
      {"cufftExecC2R", reinterpret_cast<void*>(f_exec_c2r)},
      {"cufftXtMakePlanMany", reinterpret_cast<void*>(f_xt_make_plan_many)},
      {"cufftXtExec", reinterpret_cast<void*>(f_xt_exec)},
  };
  auto it = t.find(name);
  return it == t.end() ? nullptr : it->second;
}

uint64_t fake_live_cufft_plans() {
  std::lock_guard l(g_mu);
  return g_plans.size();
}

FakeCufftPlan fake_cufft_newest_plan() {
  std::lock_guard l(g_mu);
  if (g_plans.empty()) return {};
  const Plan& p = g_plans.rbegin()->second;
  return {true, p.nx, p.type, p.batch, p.stream, p.work_area, p.auto_allocation};
}

}  // namespace vmcuda::testing
