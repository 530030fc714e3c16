// Probe on the GPU machine: does an illegal address in one CUDA context of a process
// poison the process's other contexts? (It decides whether vmcuda-stub can isolate
// clients with contexts alone.) Prints what each call returns.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

#include "driver_api.h"

using namespace vmcuda::host;

int main(int argc, char** argv) {
  DriverApi api;
  std::string why;
  if (!load_libcuda(api, &why)) return std::printf("%s\n", why.c_str()), 1;
  std::ifstream f(argv[1], std::ios::binary);
  std::vector<char> fatbin((std::istreambuf_iterator<char>(f)), {});
  api.cuInit(0);
  CUdevice dev;
  api.cuDeviceGet(&dev, 0);
  CUcontext a, b;
  std::printf("create A=%d\n", api.cuCtxCreate_v4(&a, nullptr, 0, dev));
  std::printf("create B=%d\n", api.cuCtxCreate_v4(&b, nullptr, 0, dev));
  CUdeviceptr pb;
  api.cuCtxSetCurrent(b);
  std::printf("B alloc before=%d\n", api.cuMemAlloc_v2(&pb, 1 << 20));
  api.cuCtxSetCurrent(a);
  CUmodule m;
  CUfunction fn;
  std::printf("A load=%d\n", api.cuModuleLoadData(&m, fatbin.data()));
  std::printf("A getfn=%d\n", api.cuModuleGetFunction(&fn, m, "fault"));
  CUdeviceptr bad = 0x10;
  void* params[] = {&bad};
  std::printf("A launch=%d\n", api.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
  std::printf("A sync=%d\n", api.cuCtxSynchronize());
  api.cuCtxSetCurrent(b);
  CUdeviceptr pb2;
  std::printf("B alloc after=%d\n", api.cuMemAlloc_v2(&pb2, 1 << 20));
  std::printf("B sync after=%d\n", api.cuCtxSynchronize());
  int h = 7;
  std::printf("B htod after=%d\n", api.cuMemcpyHtoD_v2(pb, &h, 4));
  CUcontext c;
  std::printf("create C after=%d\n", api.cuCtxCreate_v4(&c, nullptr, 0, dev));
  std::printf("destroy A=%d\n", api.cuCtxDestroy_v2(a));
  CUcontext d;
  std::printf("create D after destroying A=%d\n", api.cuCtxCreate_v4(&d, nullptr, 0, dev));
  api.cuCtxSetCurrent(d);
  CUdeviceptr pd;
  std::printf("D alloc=%d\n", api.cuMemAlloc_v2(&pd, 1 << 20));
  api.cuCtxSetCurrent(b);
  std::printf("B alloc after destroying A=%d\n", api.cuMemAlloc_v2(&pb2, 1 << 20));
  return 0;
}
