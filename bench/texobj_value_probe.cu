// Whether texture and surface object values could survive a suspend (docs/snapshots.md):
// kernels receive a CUtexObject / CUsurfObject by value and may keep it in device memory, so
// a resume would have to give each object its old value, and the driver has no call that
// takes one. What the driver hands out is learnt here:
//  1. values in one context, in creation order, and after some are destroyed (reuse?);
//  2. the same creations in a fresh context after the first is destroyed (do they repeat?);
//  3. two contexts of one process at once (vmcuda's --isolation thread: are values per
//     context or per process?);
//  4. a wanted set of values (the survivors of 1) got back in a fresh context by creating
//     placeholders and destroying them (the only way a resume could choose values).
// Each line says what it found; the last lines say whether a resume could keep the values.
//   texobj_value_probe [DEVICE]
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <vector>

#define CK(x)                                                          \
  do {                                                                 \
    CUresult r_ = (x);                                                 \
    if (r_ != CUDA_SUCCESS) {                                          \
      const char* n_ = nullptr;                                        \
      cuGetErrorName(r_, &n_);                                         \
      std::printf("FAIL %s: %s\n", #x, n_ ? n_ : "?");                 \
      std::exit(1);                                                    \
    }                                                                  \
  } while (0)

static CUarray make_array(bool surface) {
  CUDA_ARRAY3D_DESCRIPTOR d{};
  d.Width = 64;
  d.Height = 64;
  d.Format = CU_AD_FORMAT_FLOAT;
  d.NumChannels = 1;
  d.Flags = surface ? CUDA_ARRAY3D_SURFACE_LDST : 0;
  CUarray a;
  CK(cuArray3DCreate(&a, &d));
  return a;
}

static CUtexObject make_tex(CUarray a) {
  CUDA_RESOURCE_DESC r{};
  r.resType = CU_RESOURCE_TYPE_ARRAY;
  r.res.array.hArray = a;
  CUDA_TEXTURE_DESC t{};
  t.filterMode = CU_TR_FILTER_MODE_POINT;
  CUtexObject o;
  CK(cuTexObjectCreate(&o, &r, &t, nullptr));
  return o;
}

static CUsurfObject make_surf(CUarray a) {
  CUDA_RESOURCE_DESC r{};
  r.resType = CU_RESOURCE_TYPE_ARRAY;
  r.res.array.hArray = a;
  CUsurfObject o;
  CK(cuSurfObjectCreate(&o, &r));
  return o;
}

static void print(const char* what, const std::vector<unsigned long long>& v) {
  std::printf("%s:", what);
  for (auto x : v) std::printf(" %llu", x);
  std::printf("\n");
}

int main(int argc, char** argv) {
  const int device = argc > 1 ? std::atoi(argv[1]) : 0;
  CK(cuInit(0));
  CUdevice dev;
  CK(cuDeviceGet(&dev, device));
  CUcontext a;
  CK(cuCtxCreate(&a, nullptr, 0, dev));
  CUarray arr = make_array(true);
  // 1.
  std::vector<unsigned long long> first, surf_first;
  for (int i = 0; i < 6; ++i) first.push_back(make_tex(arr));
  for (int i = 0; i < 3; ++i) surf_first.push_back(make_surf(arr));
  print("1. textures in creation order", first);
  print("1. surfaces in creation order", surf_first);
  CK(cuTexObjectDestroy(first[1]));
  CK(cuTexObjectDestroy(first[3]));
  const unsigned long long after = make_tex(arr);
  std::printf("1. after destroying the 2nd and 4th, a new texture gets %llu (%s)\n", after,
              after == first[1] || after == first[3] ? "a freed value is reused" : "no reuse");
  std::vector<unsigned long long> wanted = {first[0], first[2], first[4], first[5], after};
  CK(cuCtxDestroy(a));
  // 2.
  CUcontext b;
  CK(cuCtxCreate(&b, nullptr, 0, dev));
  arr = make_array(true);
  std::vector<unsigned long long> again, surf_again;
  for (int i = 0; i < 6; ++i) again.push_back(make_tex(arr));
  for (int i = 0; i < 3; ++i) surf_again.push_back(make_surf(arr));
  print("2. textures in a fresh context", again);
  print("2. surfaces in a fresh context", surf_again);
  const bool repeat = again == first && surf_again == surf_first;
  std::printf("2. values %s in a fresh context\n", repeat ? "repeat" : "differ");
  // 3.
  CUcontext c;
  CK(cuCtxCreate(&c, nullptr, 0, dev));
  CUarray arr_c = make_array(false);
  std::vector<unsigned long long> other;
  for (int i = 0; i < 3; ++i) other.push_back(make_tex(arr_c));
  print("3. textures of a second context beside it", other);
  std::set<unsigned long long> in_b(again.begin(), again.end());
  bool clash = false;
  for (auto v : other) clash |= in_b.count(v) != 0;
  std::printf("3. values are %s\n", clash ? "per context (two contexts give equal values)" : "unique in the process");
  CK(cuCtxDestroy(c));
  CK(cuCtxDestroy(b));
  // 4.
  CUcontext d;
  CK(cuCtxCreate(&d, nullptr, 0, dev));
  arr = make_array(false);
  std::set<unsigned long long> want(wanted.begin(), wanted.end()), got;
  std::vector<unsigned long long> placeholders;
  for (int i = 0; i < 4096 && got.size() < want.size(); ++i) {
    const unsigned long long v = make_tex(arr);
    if (want.count(v) != 0) got.insert(v);
    else placeholders.push_back(v);
  }
  for (auto v : placeholders) CK(cuTexObjectDestroy(v));
  print("4. wanted", wanted);
  std::printf("4. got %zu of %zu wanted values back with %zu placeholders\n", got.size(), want.size(),
              placeholders.size());
  CK(cuCtxDestroy(d));
  std::printf("verdict: a resume %s keep texture object values\n",
              repeat && got.size() == want.size() ? "could (recreate in order with placeholders, then check)" : "cannot");
  return 0;
}
