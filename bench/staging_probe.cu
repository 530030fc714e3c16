// Where a suspend's host-side time can go, measured piece by piece on the GPU machine
// (docs/benchmarks.md, "Suspend and resume"): pinning fresh memory, device-to-host copies
// into pinned and pageable memory, XXH3, first touch of fresh memory, and a pipeline of
// copies through a small pinned ring into fresh memory with several threads, and pinning
// the state in place on several threads.
//   staging_probe GIB [THREADS...]
#define XXH_INLINE_ALL
#include <sys/mman.h>
#include <xxhash.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

namespace {
using clk = std::chrono::steady_clock;
double since(clk::time_point t) { return std::chrono::duration<double>(clk::now() - t).count(); }
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}
void* fresh(size_t n) {
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) std::exit(1);
  madvise(p, n, MADV_HUGEPAGE);
  return p;
}
void report(const char* what, size_t bytes, double s) {
  std::printf("%-58s %8.1f ms  %6.1f GB/s\n", what, s * 1000, bytes / s / 1e9);
}
}  // namespace

int main(int argc, char** argv) {
  const size_t gib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1;
  const size_t n = gib << 30;
  std::vector<int> threads;
  for (int i = 2; i < argc; ++i) threads.push_back(std::atoi(argv[i]));
  if (threads.empty()) threads = {1, 4, 8, 16};
  check(cudaSetDevice(0), "cudaSetDevice");
  void* dev = nullptr;
  check(cudaMalloc(&dev, n), "cudaMalloc");
  check(cudaMemset(dev, 0x5a, n), "cudaMemset");
  check(cudaDeviceSynchronize(), "sync");
  std::printf("== %zu GiB\n", gib);

  {  // what the stub does today: a fresh THP slab, registered, copied into, unregistered
    auto t = clk::now();
    void* h = fresh(n);
    check(cudaHostRegister(h, n, cudaHostRegisterPortable), "cudaHostRegister");
    report("mmap + cudaHostRegister of fresh memory", n, since(t));
    t = clk::now();
    check(cudaMemcpy(h, dev, n, cudaMemcpyDeviceToHost), "DtoH");
    report("DtoH into it (pinned)", n, since(t));
    t = clk::now();
    XXH64_hash_t x = XXH3_64bits(h, n);
    report("XXH3 over it, one thread", n, since(t));
    t = clk::now();
    check(cudaHostUnregister(h), "cudaHostUnregister");
    report("cudaHostUnregister", n, since(t));
    t = clk::now();
    check(cudaHostRegister(h, n, cudaHostRegisterPortable), "cudaHostRegister");
    report("cudaHostRegister again (touched memory)", n, since(t));
    check(cudaHostUnregister(h), "cudaHostUnregister");
    munmap(h, n);
    if (x == 42) std::puts("");
  }
  {
    auto t = clk::now();
    void* h = nullptr;
    check(cudaHostAlloc(&h, n, cudaHostAllocPortable), "cudaHostAlloc");
    report("cudaHostAlloc", n, since(t));
    t = clk::now();
    check(cudaFreeHost(h), "cudaFreeHost");
    report("cudaFreeHost", n, since(t));
  }
  {
    void* h = fresh(n);
    auto t = clk::now();
    check(cudaMemcpy(h, dev, n, cudaMemcpyDeviceToHost), "DtoH");
    report("DtoH into fresh pageable memory", n, since(t));
    munmap(h, n);
  }
  // A pinned ring of 4 x 64 MiB, registered once; DtoH into slot i while T threads copy
  // slot i-1 out into fresh memory and hash it.
  const size_t chunk = 64ull << 20, slots = 4;
  void* ring = fresh(chunk * slots);
  {
    auto t = clk::now();
    check(cudaHostRegister(ring, chunk * slots, cudaHostRegisterPortable), "cudaHostRegister ring");
    report("register a 256 MiB ring", chunk * slots, since(t));
  }
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  cudaEvent_t done[4];
  for (auto& e : done) check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "event");
  for (int T : threads) {
    {
      void* h = fresh(n);
      auto t = clk::now();
      std::vector<std::thread> ts;
      for (int i = 0; i < T; ++i)
        ts.emplace_back([&, i] {
          const size_t per = n / T;
          std::memset(static_cast<char*>(h) + i * per, 0, per);
        });
      for (auto& x : ts) x.join();
      char what[96];
      std::snprintf(what, sizeof what, "first touch of fresh memory, %d threads", T);
      report(what, n, since(t));
      munmap(h, n);
    }
    void* h = fresh(n);
    const size_t chunks = n / chunk;
    std::vector<XXH64_hash_t> sums(chunks);
    auto t = clk::now();
    for (size_t c = 0; c < chunks; ++c) {
      const size_t slot = c % slots;
      if (c >= slots) check(cudaEventSynchronize(done[slot]), "slot free");  // (copied out below before reuse)
      check(cudaMemcpyAsync(static_cast<char*>(ring) + slot * chunk, static_cast<char*>(dev) + c * chunk, chunk,
                            cudaMemcpyDeviceToHost, s),
            "DtoH async");
      check(cudaEventRecord(done[slot], s), "record");
      if (c >= 1) {  // copy out the previous chunk with T threads
        const size_t pc = c - 1, ps = pc % slots;
        check(cudaEventSynchronize(done[ps]), "wait");
        std::vector<std::thread> ts;
        const size_t per = chunk / T;
        for (int i = 0; i < T; ++i)
          ts.emplace_back([&, i] {
            char* dst = static_cast<char*>(h) + pc * chunk + i * per;
            const char* src = static_cast<char*>(ring) + ps * chunk + i * per;
            std::memcpy(dst, src, per);
            XXH3_64bits(dst, per);
          });
        for (auto& x : ts) x.join();
      }
    }
    {
      const size_t pc = chunks - 1, ps = pc % slots;
      check(cudaEventSynchronize(done[ps]), "wait");
      std::memcpy(static_cast<char*>(h) + pc * chunk, static_cast<char*>(ring) + ps * chunk, chunk);
    }
    char what[96];
    std::snprintf(what, sizeof what, "ring pipeline into fresh memory + XXH3, %d threads", T);
    report(what, n, since(t));
    // Back: fresh memory -> ring (T threads) -> device.
    t = clk::now();
    for (size_t c = 0; c < chunks; ++c) {
      const size_t slot = c % slots;
      if (c >= slots) check(cudaEventSynchronize(done[slot]), "slot free");
      std::vector<std::thread> ts;
      const size_t per = chunk / T;
      for (int i = 0; i < T; ++i)
        ts.emplace_back([&, i] {
          std::memcpy(static_cast<char*>(ring) + slot * chunk + i * per, static_cast<char*>(h) + c * chunk + i * per,
                      per);
        });
      for (auto& x : ts) x.join();
      check(cudaMemcpyAsync(static_cast<char*>(dev) + c * chunk, static_cast<char*>(ring) + slot * chunk, chunk,
                            cudaMemcpyHostToDevice, s),
            "HtoD async");
      check(cudaEventRecord(done[slot], s), "record");
    }
    check(cudaStreamSynchronize(s), "sync");
    std::snprintf(what, sizeof what, "ring pipeline back to the device, %d threads", T);
    report(what, n, since(t));
    munmap(h, n);
  }
  // Pinning in place, on T threads: each takes the next 64 MiB chunk of one fresh region,
  // registers it (optionally touching it first), copies device memory straight into it on
  // its own stream and hashes it. The state ends up pinned; a resume would copy it back
  // from there. Then unregistering and registering it again, both on T threads.
  for (int T : threads) {
    for (int touch_first = 0; touch_first < 2; ++touch_first) {
      char* h = static_cast<char*>(fresh(n));
      const size_t chunks = n / chunk;
      std::atomic<size_t> next{0};
      std::atomic<double> reg_s{0};
      auto t = clk::now();
      std::vector<std::thread> ts;
      for (int i = 0; i < T; ++i)
        ts.emplace_back([&] {
          cudaStream_t st;
          check(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "stream");
          for (size_t c; (c = next++) < chunks;) {
            char* p = h + c * chunk;
            const auto r = clk::now();
            if (touch_first) std::memset(p, 0, chunk);
            check(cudaHostRegister(p, chunk, cudaHostRegisterPortable), "cudaHostRegister chunk");
            reg_s = reg_s + since(r);
            check(cudaMemcpyAsync(p, static_cast<char*>(dev) + c * chunk, chunk, cudaMemcpyDeviceToHost, st), "DtoH");
            check(cudaStreamSynchronize(st), "sync");
            if (XXH3_64bits(p, chunk) == 42) std::puts("");
          }
          check(cudaStreamDestroy(st), "stream destroy");
        });
      for (auto& x : ts) x.join();
      char what[128];
      std::snprintf(what, sizeof what, "pin in place%s + DtoH + XXH3, %d threads (pin %.0f ms/thread)",
                    touch_first ? " (touched first)" : "", T, reg_s.load() * 1000 / T);
      report(what, n, since(t));
      auto parallel = [&](const char* name, auto&& body) {
        std::atomic<size_t> k{0};
        const auto t0 = clk::now();
        std::vector<std::thread> w;
        for (int i = 0; i < T; ++i)
          w.emplace_back([&] {
            for (size_t c; (c = k++) < chunks;) body(h + c * chunk);
          });
        for (auto& x : w) x.join();
        std::snprintf(what, sizeof what, "%s, %d threads", name, T);
        report(what, n, since(t0));
      };
      if (!touch_first) {
        parallel("cudaHostUnregister of the chunks", [&](char* p) { check(cudaHostUnregister(p), "unregister"); });
        parallel("cudaHostRegister again (resume's pin)",
                 [&](char* p) { check(cudaHostRegister(p, chunk, cudaHostRegisterPortable), "register"); });
        // One copy per registration (a copy may not span two), all on one stream.
        cudaStream_t st;
        check(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "stream");
        t = clk::now();
        for (size_t c = 0; c < chunks; ++c)
          check(cudaMemcpyAsync(static_cast<char*>(dev) + c * chunk, h + c * chunk, chunk, cudaMemcpyHostToDevice, st),
                "HtoD");
        check(cudaStreamSynchronize(st), "sync");
        report("HtoD from the pinned chunks, one stream", n, since(t));
        check(cudaStreamDestroy(st), "stream destroy");
      }
      parallel("cudaHostUnregister", [&](char* p) { check(cudaHostUnregister(p), "unregister"); });
      munmap(h, n);
    }
  }
  {
    auto t = clk::now();
    cudaFree(dev);
    check(cudaDeviceReset(), "reset");
    report("cudaFree + cudaDeviceReset (context destroyed)", n, since(t));
  }
  return 0;
}
