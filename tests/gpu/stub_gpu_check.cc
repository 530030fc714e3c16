// Drives a running vmcuda-stub on a real GPU through the local transport: device info,
// a real fatbin loaded and its kernel launched with the host-reported parameter
// layout, results checked; then round-trip and copy timings next to the same
// operations called natively through the driver API in this process.
//
//   stub_gpu_check SOCKET vecadd.fatbin
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "arena.h"
#include "driver_api.h"
#include "vmcuda/api/remote.h"
#include "vmrpc/client.h"

using namespace vmcuda;
using Clock = std::chrono::steady_clock;

namespace {
double us_since(Clock::time_point t) { return std::chrono::duration<double, std::micro>(Clock::now() - t).count(); }
double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * (v.size() - 1))];
}
int failures = 0;
#define CHECK(c, ...) \
  do {                \
    if (!(c)) { std::fprintf(stderr, "FAILED: " __VA_ARGS__); std::fprintf(stderr, "\n"); ++failures; } \
  } while (0)
}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return std::fprintf(stderr, "usage: %s SOCKET FATBIN\n", argv[0]), 2;
  std::ifstream f(argv[2], std::ios::binary);
  std::vector<char> fatbin((std::istreambuf_iterator<char>(f)), {});
  CHECK(!fatbin.empty(), "reading %s", argv[2]);

  auto conn = vmrpc::LocalConnection::connect(argv[1]);
  std::string why;
  auto slot = vmrpc::ClientSlot::claim(conn->region(), *conn, &why);
  if (!slot) return std::fprintf(stderr, "claim: %s\n", why.c_str()), 1;
  auto hs = api::remote<api::Call::Handshake>(*slot, {});
  CHECK(hs.status == 0 && hs.reply.device_count >= 1, "Handshake %d", hs.status);
  auto info = api::remote<api::Call::DeviceProperties>(*slot, {0, 0});
  CHECK(info.status == 0, "DeviceProperties %d", info.status);
  std::printf("device: %s, cc %d.%d, %d SMs, %.1f GiB, driver %d\n", info.reply.name, info.reply.attributes[75],
              info.reply.attributes[76], info.reply.attributes[16], info.reply.total_mem / 1073741824.0,
              hs.reply.driver_version);

  // The device profile the test executor replays in CI (tests/executor/device_profile.inc).
  if (const char* path = std::getenv("VMCUDA_PROFILE_OUT")) {
    if (FILE* out = std::fopen(path, "w")) {
      std::fprintf(out, "// Recorded from a %s by tests/gpu/stub_gpu_check (scripts/gpu-check.sh).\n", info.reply.name);
      std::fprintf(out, "VMCUDA_PROFILE_NAME(\"%s\")\n", info.reply.name);
      std::fprintf(out, "VMCUDA_PROFILE_TOTAL_MEM(%lluull)\n", (unsigned long long)info.reply.total_mem);
      std::fprintf(out, "VMCUDA_PROFILE_UUID(");
      for (int i = 0; i < 16; ++i) std::fprintf(out, "%s0x%02x", i ? ", " : "", info.reply.uuid[i]);
      std::fprintf(out, ")\n");
      for (uint32_t i = 1; i < api::kDeviceAttributeSlots; ++i)
        if (info.reply.attributes[i]) std::fprintf(out, "VMCUDA_PROFILE_ATTR(%u, %d)\n", i, info.reply.attributes[i]);
      std::fclose(out);
    }
  }

  // vecadd through the stub.
  const int n = 1 << 20;
  const uint64_t bytes = n * sizeof(float);
  uint64_t d[3];
  for (auto& p : d) {
    auto r = api::remote<api::Call::Malloc>(*slot, {bytes});
    CHECK(r.status == 0, "Malloc %d", r.status);
    p = r.reply.ptr;
  }
  // Device memory comes from the client's VMM arena at its fixed range (host-stub/src/arena.h):
  // the driver honoured the hint, large allocations lie back to back, granularity-rounded.
  std::printf("arena [0x%llx, +0x%llx): 0x%llx 0x%llx 0x%llx\n", (unsigned long long)hs.reply.arena_base,
              (unsigned long long)hs.reply.arena_bytes, (unsigned long long)d[0], (unsigned long long)d[1],
              (unsigned long long)d[2]);
  CHECK(hs.reply.arena_base == vmcuda::host::kArenaBase && d[0] == hs.reply.arena_base && d[1] == d[0] + bytes &&
            d[2] == d[1] + bytes,
        "arena pointers");
  auto ha = slot->heap().allocate(bytes), hb = slot->heap().allocate(bytes), hc = slot->heap().allocate(bytes);
  auto* a = reinterpret_cast<float*>(ha->data);
  auto* b = reinterpret_cast<float*>(hb->data);
  for (int i = 0; i < n; ++i) a[i] = i * 0.5f, b[i] = 1000.0f - i;
  CHECK(api::remote<api::Call::CopyToDeviceHeap>(*slot, {d[0], ha->ref()}).status == 0, "HtoD a");
  CHECK(api::remote<api::Call::CopyToDeviceHeap>(*slot, {d[1], hb->ref()}).status == 0, "HtoD b");
  auto image = slot->heap().allocate(fatbin.size());
  std::memcpy(image->data, fatbin.data(), fatbin.size());
  auto mod = api::remote<api::Call::ModuleLoad>(*slot, {image->ref()});
  CHECK(mod.status == 0, "ModuleLoad %d", mod.status);
  const std::string name = "vecadd";
  auto fn = api::remote<api::Call::ModuleGetFunction>(*slot, {mod.reply.handle, uint32_t(name.size()), 0},
                                                      std::as_bytes(std::span(name)), 4096);
  CHECK(fn.status == 0 && fn.reply.param_count == 4, "GetFunction %d params %u", fn.status, fn.reply.param_count);
  std::vector<api::ParamInfo> params(fn.reply.param_count);
  std::memcpy(params.data(), fn.extra.data(), params.size() * sizeof(api::ParamInfo));
  for (auto& p : params) std::printf("param at %u size %u\n", p.offset, p.size);
  std::vector<std::byte> packed(params.back().offset + params.back().size);
  for (int i = 0; i < 3; ++i) std::memcpy(packed.data() + params[i].offset, &d[i], 8);
  std::memcpy(packed.data() + params[3].offset, &n, 4);
  api::LaunchArgs la{fn.reply.function, {uint32_t(n / 256), 1, 1}, {256, 1, 1}, 0, uint32_t(packed.size()), 0};
  CHECK(api::remote<api::Call::LaunchKernel>(*slot, la, packed).status == 0, "launch");
  CHECK(api::remote<api::Call::DeviceSynchronize>(*slot, {}).status == 0, "sync");
  CHECK(api::remote<api::Call::CopyFromDeviceHeap>(*slot, {d[2], hc->ref()}).status == 0, "DtoH c");
  auto* c = reinterpret_cast<float*>(hc->data);
  int bad = 0;
  for (int i = 0; i < n; ++i) bad += c[i] != a[i] + b[i];
  CHECK(bad == 0, "%d of %d results wrong", bad, n);
  std::printf("vecadd through vmcuda-stub: %s\n", bad ? "WRONG" : "correct (1M elements)");

  // Timings: stub vs native, same process, same GPU.
  host::DriverApi native;
  CHECK(host::load_libcuda(native, &why), "%s", why.c_str());
  native.cuInit(0);
  host::CUdevice dev;
  host::CUcontext ctx;
  native.cuDeviceGet(&dev, 0);
  native.cuCtxCreate_v4(&ctx, nullptr, 0, dev);
  std::vector<double> t_stub, t_native;
  for (int i = 0; i < 20000; ++i) {
    auto t = Clock::now();
    api::remote<api::Call::DeviceSynchronize>(*slot, {});
    t_stub.push_back(us_since(t));
    t = Clock::now();
    native.cuCtxSynchronize();
    t_native.push_back(us_since(t));
  }
  std::printf("idle synchronize round trip: stub p50 %.2f us p99 %.2f us | native p50 %.2f us p99 %.2f us\n",
              pct(t_stub, .5), pct(t_stub, .99), pct(t_native, .5), pct(t_native, .99));
  const uint64_t big = 256ull << 20;
  auto hbig = slot->heap().allocate(big);
  CHECK(hbig.has_value(), "heap 256 MiB");
  // Pinned on request, as cudaMallocHost memory is (the pageable figures below copy into
  // it first, as a pageable cudaMemcpy stages through pinned chunks).
  CHECK(api::remote<api::Call::PinHeap>(*slot, {hbig->ref()}).status == 0, "PinHeap 256 MiB");
  auto dbig = api::remote<api::Call::Malloc>(*slot, {big}).reply.ptr;
  std::vector<char> pageable(big, 1);
  host::CUdeviceptr nd;
  native.cuMemAlloc_v2(&nd, big);
  for (int rep = 0; rep < 3; ++rep) {
    auto t = Clock::now();
    std::memcpy(hbig->data, pageable.data(), big);  // what a pageable cudaMemcpy costs the guest
    api::remote<api::Call::CopyToDeviceHeap>(*slot, {dbig, hbig->ref()});
    const double stub_s = us_since(t) / 1e6;
    t = Clock::now();
    api::remote<api::Call::CopyToDeviceHeap>(*slot, {dbig, hbig->ref()});
    const double heap_s = us_since(t) / 1e6;
    t = Clock::now();
    native.cuMemcpyHtoD_v2(nd, pageable.data(), big);
    const double nat_s = us_since(t) / 1e6;
    std::printf("256 MiB HtoD: stub pageable (memcpy into heap + copy) %.2f GB/s | stub from heap %.2f GB/s | "
                "native pageable %.2f GB/s\n",
                big / stub_s / 1e9, big / heap_s / 1e9, big / nat_s / 1e9);
  }
  // Pinned: the heap is registered by the stub; natively, cuMemHostAlloc'd memory.
  using HostAlloc = host::CUresult (*)(void**, size_t, unsigned);
  auto host_alloc = reinterpret_cast<HostAlloc>(dlsym(dlopen("libcuda.so.1", RTLD_NOW), "cuMemHostAlloc"));
  void* pinned = nullptr;
  CHECK(host_alloc && host_alloc(&pinned, big, 0) == 0, "cuMemHostAlloc");
  for (int rep = 0; rep < 3 && pinned; ++rep) {
    auto t = Clock::now();
    api::remote<api::Call::CopyToDeviceHeap>(*slot, {dbig, hbig->ref()});
    const double h2d = us_since(t) / 1e6;
    t = Clock::now();
    api::remote<api::Call::CopyFromDeviceHeap>(*slot, {dbig, hbig->ref()});
    const double d2h = us_since(t) / 1e6;
    t = Clock::now();
    native.cuMemcpyHtoD_v2(nd, pinned, big);
    const double nh2d = us_since(t) / 1e6;
    t = Clock::now();
    native.cuMemcpyDtoH_v2(pinned, nd, big);
    const double nd2h = us_since(t) / 1e6;
    std::printf("256 MiB pinned: stub heap HtoD %.2f GB/s DtoH %.2f GB/s | native HtoD %.2f GB/s DtoH %.2f GB/s\n",
                big / h2d / 1e9, big / d2h / 1e9, big / nh2d / 1e9, big / nd2h / 1e9);
  }
  // ModuleUnload on the real driver (host-stub/src/module.cc; what the VM's quota is charged
  // is checked in CI on the test executor: tests/host-stub/stub_modules_test.cc). Beside it,
  // what the driver really takes for a module: the GPU's free memory (native cuMemGetInfo;
  // nothing else runs) before and after a load of the fatbin, against the image's size, the
  // charge's main part.
  {
    auto gpu_free = [&] {
      size_t free = 0, total = 0;
      native.cuMemGetInfo_v2(&free, &total);
      return static_cast<int64_t>(free);
    };
    const int64_t before = gpu_free();
    auto again = api::remote<api::Call::ModuleLoad>(*slot, {image->ref()});
    CHECK(again.status == 0, "ModuleLoad again %d", again.status);
    const int64_t loaded = gpu_free();
    CHECK(api::remote<api::Call::ModuleUnload>(*slot, {again.reply.handle}).status == 0, "ModuleUnload");
    const int64_t unloaded = gpu_free();
    CHECK(api::remote<api::Call::ModuleUnload>(*slot, {again.reply.handle}).status == 400, "ModuleUnload twice");
    std::printf("module: a %zu-byte fatbin took %lld bytes of the GPU's memory at its load; its unload gave back %lld\n",
                fatbin.size(), static_cast<long long>(before - loaded), static_cast<long long>(unloaded - loaded));
  }
  std::printf("%s\n", failures ? "STUB-GPU-CHECK FAILED" : "STUB-GPU-CHECK OK");
  return failures ? 1 : 0;
}
