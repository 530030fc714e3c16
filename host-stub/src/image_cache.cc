#include "image_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <stdexcept>

#include "vmrpc/log.h"

namespace vmcuda::host {

Sha256 sha256(std::span<const std::byte> bytes) {
  Sha256 h{};
  unsigned len = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), h.data(), &len, EVP_sha256(), nullptr) != 1 || len != h.size())
    throw std::runtime_error("SHA-256 failed (libcrypto)");
  return h;
}

std::string hex(const Sha256& h) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  for (uint8_t b : h) s += {kDigits[b >> 4], kDigits[b & 15]};
  return s;
}

std::shared_ptr<const ImageBytes> ImageBytes::copy(std::vector<std::byte> bytes) {
  auto p = std::make_shared<ImageBytes>();
  p->own_ = std::move(bytes);
  p->data_ = p->own_.data();
  p->size_ = p->own_.size();
  return p;
}

std::shared_ptr<const ImageBytes> ImageBytes::mapped(vmrpc::Mapping map, size_t offset, size_t bytes) {
  auto p = std::make_shared<ImageBytes>();
  p->map_ = std::move(map);
  p->data_ = p->map_.data() + offset;
  p->size_ = bytes;
  return p;
}

namespace {

constexpr uint64_t kFileMagic = 0x31474d4943554d56ull;   // "VMUCIMG1"
constexpr uint64_t kStatsMagic = 0x31545343554d56ull;    // "VMUCST1"
constexpr size_t kHeader = 4096;  // the image starts page-aligned
struct FileHeader {
  uint64_t magic;
  uint64_t bytes;   // the image's, unpadded (the hash's input)
  uint64_t padded;  // what follows the header
  uint8_t hash[32];
  char vm[256];     // the VM that added it (NUL-terminated)
};
static_assert(sizeof(FileHeader) <= kHeader);

bool is_hash_name(const char* n) {
  if (std::strlen(n) != 64) return false;
  for (const char* p = n; *p; ++p)
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return false;
  return true;
}

// Holds the directory's lock file (flock): stores and evictions, across processes.
struct DirLock {
  int fd;
  explicit DirLock(int f) : fd(f) { while (::flock(fd, LOCK_EX) != 0 && errno == EINTR) {} }
  ~DirLock() { ::flock(fd, LOCK_UN); }
};

bool write_all(int fd, const void* p, size_t n) {
  auto* b = static_cast<const char*>(p);
  while (n) {
    const ssize_t w = ::write(fd, b, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    b += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

std::string ImageCache::default_dir(const std::string& runtime_dir, const std::string& vm, Scope scope) {
  const auto base = std::filesystem::path(runtime_dir) / "image-cache";
  return (scope == Scope::kHost ? base / "host" : base / ("vm-" + vm)).string();
}

std::shared_ptr<ImageCache> ImageCache::open(const Options& o, std::string* why) {
  auto fail = [&](const std::string& what) {
    if (why) *why = "image cache " + o.dir + ": " + what + " (" + std::strerror(errno) + ")";
    return nullptr;
  };
  std::error_code ec;
  const auto parent = std::filesystem::path(o.dir).parent_path();
  if (!parent.empty() && ::mkdir(parent.c_str(), 0700) != 0 && errno != EEXIST) return fail("cannot create its parent");
  if (::mkdir(o.dir.c_str(), 0700) != 0 && errno != EEXIST) return fail("cannot create it");
  vmrpc::UniqueFd dir(::open(o.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
  if (!dir) return fail("cannot open it");
  struct stat st{};
  if (::fstat(dir.get(), &st) != 0) return fail("cannot stat it");
  // Images are loaded from here as they are: only this user may write here.
  if (st.st_uid != ::geteuid() || (st.st_mode & 022)) {
    errno = EPERM;
    return fail("belongs to another user or others may write to it; remove it or use another --image-cache-dir");
  }
  vmrpc::UniqueFd lock(::openat(dir.get(), ".lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!lock) return fail("cannot open its lock file");
  vmrpc::UniqueFd stats(::openat(dir.get(), ".stats", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!stats) return fail("cannot open its counters");
  {
    DirLock l(lock.get());
    struct stat ss{};
    if (::fstat(stats.get(), &ss) != 0) return fail("cannot stat its counters");
    if (ss.st_size < static_cast<off_t>(sizeof(Counters)) && ::ftruncate(stats.get(), sizeof(Counters)) != 0)
      return fail("cannot size its counters");
  }
  void* p = ::mmap(nullptr, sizeof(Counters), PROT_READ | PROT_WRITE, MAP_SHARED, stats.get(), 0);
  if (p == MAP_FAILED) return fail("cannot map its counters");
  vmrpc::Mapping counters(p, sizeof(Counters));
  auto* c = reinterpret_cast<Counters*>(p);
  if (c->magic != kStatsMagic) {  // new (zeros) or not ours: counting starts afresh
    c->hits = c->misses = c->stored = c->evicted = 0;
    c->magic = kStatsMagic;
  }
  return std::shared_ptr<ImageCache>(new ImageCache(o, std::move(dir), std::move(lock), std::move(counters)));
}

ImageCache::ImageCache(const Options& o, vmrpc::UniqueFd dir, vmrpc::UniqueFd lock, vmrpc::Mapping counters)
    : dir_(o.dir),
      vm_(o.vm),
      cap_(o.cap_bytes),
      vm_bound_(std::min(o.vm_bound_bytes, o.cap_bytes)),
      dir_fd_(std::move(dir)),
      lock_fd_(std::move(lock)),
      counters_(std::move(counters)) {}

std::shared_ptr<const ImageBytes> ImageCache::find(const Sha256& hash, uint64_t bytes) {
  auto found = lookup(hash, bytes);
  (found ? counters()->hits : counters()->misses).fetch_add(1, std::memory_order_relaxed);
  return found;
}

std::shared_ptr<const ImageBytes> ImageCache::lookup(const Sha256& hash, uint64_t bytes) const {
  const std::string name = hex(hash);
  auto miss = []() -> std::shared_ptr<const ImageBytes> { return nullptr; };
  vmrpc::UniqueFd fd(::openat(dir_fd_.get(), name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return miss();
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < static_cast<off_t>(kHeader)) return miss();
  void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) return miss();
  vmrpc::Mapping map(p, static_cast<size_t>(st.st_size));
  FileHeader h;
  std::memcpy(&h, map.data(), sizeof h);
  // Written by a stub of this user: the header is checked against the name and the file
  // all the same (a file cut short, a stub of another version).
  if (h.magic != kFileMagic || h.bytes != bytes || h.padded < h.bytes || h.padded > uint64_t(st.st_size) - kHeader ||
      std::memcmp(h.hash, hash.data(), hash.size()) != 0)
    return miss();
  const timespec now[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};  // least recently used: by mtime
  ::futimens(fd.get(), now);
  return ImageBytes::mapped(std::move(map), kHeader, h.padded);
}

std::vector<ImageCache::Entry> ImageCache::scan() const {
  std::vector<Entry> out;
  const int fd = ::openat(dir_fd_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return out;
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    return out;
  }
  while (dirent* e = ::readdir(d)) {
    if (!is_hash_name(e->d_name)) continue;
    struct stat st{};
    if (::fstatat(dir_fd_.get(), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    Entry en{e->d_name, {}, static_cast<uint64_t>(st.st_size), st.st_mtim.tv_sec * 1000000000ll + st.st_mtim.tv_nsec};
    if (vmrpc::UniqueFd f(::openat(dir_fd_.get(), e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)); f) {
      FileHeader h{};
      if (::pread(f.get(), &h, sizeof h, 0) == sizeof h && h.magic == kFileMagic) {
        h.vm[sizeof h.vm - 1] = 0;
        en.vm = h.vm;
      }
    }
    out.push_back(std::move(en));
  }
  ::closedir(d);
  return out;
}

std::shared_ptr<const ImageBytes> ImageCache::store(const Sha256& hash, uint64_t bytes,
                                                    std::shared_ptr<const ImageBytes> padded) {
  const uint64_t file_bytes = kHeader + padded->size();
  auto own = [&] { return padded; };
  if (file_bytes > vm_bound_) return own();  // never fits: not worth evicting anything for
  const std::string name = hex(hash);
  DirLock l(lock_fd_.get());
  if (auto there = lookup(hash, bytes)) return there;  // another client stored it meanwhile
  // Room: this VM's own least recently used images first while it is over its bound, then
  // anyone's while the directory is over its cap.
  std::vector<Entry> entries = scan();
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.mtime_ns < b.mtime_ns; });
  uint64_t total = 0, mine = 0;
  for (const Entry& e : entries) {
    total += e.bytes;
    if (e.vm == vm_) mine += e.bytes;
  }
  auto evict = [&](const Entry& e) {
    if (::unlinkat(dir_fd_.get(), e.name.c_str(), 0) != 0) return false;
    counters()->evicted.fetch_add(1, std::memory_order_relaxed);
    total -= e.bytes;
    if (e.vm == vm_) mine -= e.bytes;
    return true;
  };
  for (const Entry& e : entries)
    if (mine + file_bytes > vm_bound_ && e.vm == vm_) evict(e);
  for (const Entry& e : entries)
    if (total + file_bytes > cap_ && ::faccessat(dir_fd_.get(), e.name.c_str(), F_OK, AT_SYMLINK_NOFOLLOW) == 0)
      evict(e);
  if (total + file_bytes > cap_ || mine + file_bytes > vm_bound_) return own();
  // Written whole under a temporary name, then renamed: a reader sees a complete file or none.
  const std::string tmp = ".tmp-" + name;
  vmrpc::UniqueFd fd(::openat(dir_fd_.get(), tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  FileHeader h{};
  h.magic = kFileMagic;
  h.bytes = bytes;
  h.padded = padded->size();
  std::memcpy(h.hash, hash.data(), hash.size());
  std::strncpy(h.vm, vm_.c_str(), sizeof h.vm - 1);
  std::vector<std::byte> header(kHeader);
  std::memcpy(header.data(), &h, sizeof h);
  if (!fd || !write_all(fd.get(), header.data(), header.size()) || !write_all(fd.get(), padded->data(), padded->size()) ||
      ::renameat(dir_fd_.get(), tmp.c_str(), dir_fd_.get(), name.c_str()) != 0) {
    const int err = errno;
    ::unlinkat(dir_fd_.get(), tmp.c_str(), 0);
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      VMRPC_LOG(kWarn, "stub", "image cache " + dir_ + ": cannot store an image (" + std::strerror(err) +
                                   "); modules load from each client's own copy meanwhile; not logged again");
    return own();
  }
  counters()->stored.fetch_add(1, std::memory_order_relaxed);
  void* p = ::mmap(nullptr, file_bytes, PROT_READ, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) return own();
  return ImageBytes::mapped(vmrpc::Mapping(p, file_bytes), kHeader, padded->size());
}

ImageCacheStats ImageCache::stats() const {
  ImageCacheStats s;
  for (const Entry& e : scan()) {
    ++s.entries;
    s.bytes += e.bytes;
    if (e.vm == vm_) ++s.vm_entries, s.vm_bytes += e.bytes;
  }
  const Counters* c = counters();
  s.hits = c->hits.load(std::memory_order_relaxed);
  s.misses = c->misses.load(std::memory_order_relaxed);
  s.stored = c->stored.load(std::memory_order_relaxed);
  s.evicted = c->evicted.load(std::memory_order_relaxed);
  s.cap_bytes = cap_;
  s.vm_bound_bytes = vm_bound_;
  return s;
}

}  // namespace vmcuda::host
