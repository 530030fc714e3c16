// Kernel images cross once (issue 12 point 5): a content-addressed cache of the module
// images the stub was sent, shared by all clients of the stub, worker processes included
// (--isolation process), so that a framework's hundreds of MB of fatbins are sent and kept
// once rather than once per client.
//
// Storage: one immutable file per image in the cache directory (0700, in the stub's runtime
// directory), named by the SHA-256 the HOST computed over the bytes it received, 0600; a
// header page, then the checked image padded with zeros (what the driver is given). A
// module maps its file read-only: the clients and processes that load one image share its
// pages. A guest only ever names a hash (ModuleLoadCached); the bytes under a name were
// hashed here, so no guest can make another client load other bytes than the hash says.
//
// Bounds: a total byte cap for the directory and a per-VM bound on what one VM's clients
// may add (issue 10 point 3). Eviction is least recently used (a hit touches the file's
// mtime) and only unlinks: a module loaded from an evicted file keeps its mapping (the
// kernel counts the references), and it stays charged to its VM's quota as before.
//
// Scope: the directory is per VM by default (a hit across VMs would tell one VM what
// another loaded: a timing side channel like page deduplication); ImageCache::Scope::kHost
// shares one directory between the VMs of a host that opt in (docs/security.md).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "vmrpc/fd.h"

namespace vmcuda::host {

using Sha256 = std::array<uint8_t, 32>;
Sha256 sha256(std::span<const std::byte> bytes);
std::string hex(const Sha256& h);

// A module image as the stub keeps it (checked, padded): immutable, shared by the modules
// loaded from it; either the stub's own copy or a read-only mapping of a cache file.
class ImageBytes {
 public:
  static std::shared_ptr<const ImageBytes> copy(std::vector<std::byte> bytes);
  static std::shared_ptr<const ImageBytes> mapped(vmrpc::Mapping map, size_t offset, size_t bytes);
  std::span<const std::byte> span() const { return {data_, size_}; }
  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  bool from_cache() const { return map_.data() != nullptr; }

 private:
  std::vector<std::byte> own_;
  vmrpc::Mapping map_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

struct ImageCacheStats {
  uint64_t entries = 0, bytes = 0;      // in the directory now (all VMs of its scope)
  uint64_t vm_entries = 0, vm_bytes = 0;  // of those, added by this stub's VM
  uint64_t hits = 0, misses = 0;        // ModuleLoadCached answers (all processes of the directory)
  uint64_t stored = 0, evicted = 0;     // images added, files evicted
  uint64_t cap_bytes = 0, vm_bound_bytes = 0;
};

class ImageCache {
 public:
  enum class Scope { kVm, kHost };
  struct Options {
    std::string dir;   // the cache directory (made 0700 when missing)
    std::string vm;    // this stub's VM (recorded with each image it adds)
    uint64_t cap_bytes = 0;       // the directory's images together
    uint64_t vm_bound_bytes = 0;  // what one VM's images may take of it
  };
  // The default cap (vmcuda-stub --image-cache-mib): a framework's fatbins (PyTorch's are
  // some 1.5 GiB) with room for a second version.
  static constexpr uint64_t kDefaultCapMiB = 4096;
  // Opens (creates) the cache in `o.dir`; null and why when it cannot.
  static std::shared_ptr<ImageCache> open(const Options& o, std::string* why);
  // The directory a stub uses by default: under `runtime_dir`, its VM's own or the host's.
  static std::string default_dir(const std::string& runtime_dir, const std::string& vm, Scope scope);

  // The image stored under `hash` if its size is `bytes` (unpadded), mapped read-only; null
  // when there is none (a miss). Counts a hit or a miss.
  std::shared_ptr<const ImageBytes> find(const Sha256& hash, uint64_t bytes);
  // Stores `padded` (an image of `bytes` bytes the stub checked, then its padding) under
  // `hash`, which the caller computed over those bytes, evicting as the bounds require, and
  // returns the stored mapping (or the one already there); `padded` itself when it cannot
  // be stored (too large for the bounds, a full disk: the stub's own copy serves).
  std::shared_ptr<const ImageBytes> store(const Sha256& hash, uint64_t bytes, std::shared_ptr<const ImageBytes> padded);

  ImageCacheStats stats() const;
  const std::string& dir() const { return dir_; }

 private:
  struct Counters {  // the directory's `.stats` file, mapped by every process using it
    uint64_t magic;
    std::atomic<uint64_t> hits, misses, stored, evicted;
  };
  struct Entry {
    std::string name, vm;
    uint64_t bytes = 0;  // the file's
    int64_t mtime_ns = 0;
  };
  ImageCache(const Options& o, vmrpc::UniqueFd dir, vmrpc::UniqueFd lock, vmrpc::Mapping counters);
  std::vector<Entry> scan() const;
  std::shared_ptr<const ImageBytes> lookup(const Sha256& hash, uint64_t bytes) const;  // find(), not counted
  Counters* counters() const { return reinterpret_cast<Counters*>(counters_.data()); }

  std::string dir_, vm_;
  uint64_t cap_, vm_bound_;
  vmrpc::UniqueFd dir_fd_, lock_fd_;
  vmrpc::Mapping counters_;
};

}  // namespace vmcuda::host
