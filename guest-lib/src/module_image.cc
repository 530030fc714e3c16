#include "module_image.h"

#include <dlfcn.h>

#include <array>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>

#include "knobs.h"
#include "log.h"

namespace vmcuda::guest {
namespace {

using Sha256 = std::array<uint8_t, 32>;

// OpenSSL's one-shot digest, looked up at run time (module_image.h says why).
struct Crypto {
  using Digest = int (*)(const void*, size_t, unsigned char*, unsigned int*, const void* type, void* engine);
  using Sha256Type = const void* (*)();
  Digest digest = nullptr;
  Sha256Type sha256 = nullptr;
};
const Crypto& crypto() {
  static const Crypto c = [] {
    Crypto c;
    void* lib = ::dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      c.digest = reinterpret_cast<Crypto::Digest>(::dlsym(lib, "EVP_Digest"));
      c.sha256 = reinterpret_cast<Crypto::Sha256Type>(::dlsym(lib, "EVP_sha256"));
    }
    if (!c.digest || !c.sha256) {
      c = {};
      VMCUDA_LOG(kInfo, "module", "no libcrypto.so.3 (OpenSSL): module images are not named by hash, so each "
                                  "crosses to the host (install libssl3 for the host's image cache)");
    }
    return c;
  }();
  return c;
}

std::optional<Sha256> hash_of(std::span<const std::byte> bytes) {
  const Crypto& c = crypto();
  if (!c.digest) return std::nullopt;
  Sha256 h{};
  unsigned len = 0;
  if (c.digest(bytes.data(), bytes.size(), h.data(), &len, c.sha256(), nullptr) != 1 || len != h.size())
    return std::nullopt;
  return h;
}

struct Memo {
  std::mutex mu;
  std::map<std::pair<const void*, size_t>, Sha256> hashes;  // stable images: hashed once
  std::atomic<uint64_t> sent{0}, sent_bytes{0}, hits{0};
};
Memo& memo() {
  static auto* m = new Memo;  // never destroyed: modules load from atexit paths too
  return *m;
}

std::optional<Sha256> image_hash(std::span<const std::byte> image, bool stable) {
  auto& m = memo();
  const auto key = std::make_pair(static_cast<const void*>(image.data()), image.size());
  if (stable) {
    std::lock_guard l(m.mu);
    if (auto it = m.hashes.find(key); it != m.hashes.end()) return it->second;
  }
  auto h = hash_of(image);
  if (h && stable) {
    std::lock_guard l(m.mu);
    m.hashes[key] = *h;
  }
  return h;
}

}  // namespace

ModuleLoadResult load_module_image(Remote& r, std::span<const std::byte> image, bool stable) {
  ModuleLoadResult out;
  if (knobs::kImageCache.get() != 0) {
    if (auto h = image_hash(image, stable)) {
      api::ModuleLoadCachedArgs a{};
      std::memcpy(a.sha256, h->data(), h->size());
      a.bytes = image.size();
      auto res = r.call<api::Call::ModuleLoadCached>(a);
      if (res.status != 0 || res.reply.hit) {  // loaded from the host's copy, or an error to report
        if (res.status == 0) memo().hits.fetch_add(1, std::memory_order_relaxed);
        out.status = res.status;
        out.handle = res.reply.handle;
        return out;
      }
    }
  }
  auto block = r.slot().heap().allocate(image.size());
  if (!block) {
    out.heap_full = true;
    return out;
  }
  std::memcpy(block->data, image.data(), image.size());
  auto res = r.call<api::Call::ModuleLoad>({block->ref()});
  r.slot().heap().free(block->offset);
  memo().sent.fetch_add(1, std::memory_order_relaxed);
  memo().sent_bytes.fetch_add(image.size(), std::memory_order_relaxed);
  out.status = res.status;
  out.handle = res.reply.handle;
  return out;
}

namespace testing {
ImageCounts image_counts() {
  auto& m = memo();
  return {m.sent.load(), m.sent_bytes.load(), m.hits.load()};
}
}  // namespace testing

}  // namespace vmcuda::guest
