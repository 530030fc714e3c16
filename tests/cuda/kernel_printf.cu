// Device-side printf: the driver writes a kernel's printf() to the process's stdout at
// synchronizing calls (device, stream and event synchronize, synchronous copies); under
// vmcuda it must reach the app's stdout there too, in the same place among the host's
// lines. Each kernel prints from one thread (several threads' lines have no fixed order);
// the host prints around each synchronizing call.
#include <cuda_runtime.h>

#include <cstdio>

__global__ void print_lines(int n, int base) {
  for (int i = 0; i < n; ++i) printf("kernel: line %d of %d, value %d\n", i, n, base + i * i);
}

__global__ void print_values(float x, unsigned long long u, int tag) {
  printf("kernel %d: %.3f %llu 0x%llx %c\n", tag, x, u, u, 'A' + tag);
}

__global__ void print_many(int n) {
  for (int i = 0; i < n; ++i) printf("many %05d abcdefghijklmnopqrstuvwxyz\n", i);
}

__global__ void store_and_print(int* out, int v) {
  *out = v * 2;
  printf("kernel: stored %d\n", v * 2);
}

static void check(const char* what, cudaError_t e) { printf("%s: %s\n", what, cudaGetErrorName(e)); }

int main() {
  printf("host: start\n");
  print_lines<<<1, 1>>>(3, 10);
  printf("host: launched print_lines\n");
  check("cudaDeviceSynchronize", cudaDeviceSynchronize());
  printf("host: after the device synchronize\n");

  cudaStream_t s;
  check("cudaStreamCreate", cudaStreamCreate(&s));
  print_values<<<1, 1, 0, s>>>(2.5f, 1234567890123ull, 1);
  printf("host: launched print_values on a stream\n");
  check("cudaStreamSynchronize", cudaStreamSynchronize(s));

  cudaEvent_t ev;
  check("cudaEventCreate", cudaEventCreate(&ev));
  print_values<<<1, 1, 0, s>>>(-0.125f, 42, 2);
  check("cudaEventRecord", cudaEventRecord(ev, s));
  printf("host: recorded an event after print_values\n");
  check("cudaEventSynchronize", cudaEventSynchronize(ev));

  int* d = nullptr;
  check("cudaMalloc", cudaMalloc(&d, sizeof(int)));
  store_and_print<<<1, 1>>>(d, 21);
  printf("host: copying the value back\n");
  int h = 0;
  check("cudaMemcpy", cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
  printf("host: value %d %s\n", h, h == 42 ? "ok" : "MISMATCH");

  // Two kernels on one stream before one synchronize: their lines in launch order.
  print_lines<<<1, 1>>>(2, 100);
  print_values<<<1, 1>>>(1.0f, 7, 3);
  check("cudaDeviceSynchronize", cudaDeviceSynchronize());

  // More at one synchronize than vmcuda's ring in the guest holds (64 KiB).
  print_many<<<1, 1>>>(2000);
  check("cudaDeviceSynchronize", cudaDeviceSynchronize());
  printf("host: after the many lines\n");

  // A synchronize with nothing printed since: no output of its own.
  check("cudaDeviceSynchronize", cudaDeviceSynchronize());

  check("cudaFree", cudaFree(d));
  check("cudaEventDestroy", cudaEventDestroy(ev));
  check("cudaStreamDestroy", cudaStreamDestroy(s));
  printf("host: done\n");
  return 0;
}
