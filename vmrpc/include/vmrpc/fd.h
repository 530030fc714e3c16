// RAII owners for file descriptors and memory mappings, and errno-style failures.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

namespace vmrpc {

// An OS call failed: the message names the call and what it was doing.
[[noreturn]] inline void throw_errno(const std::string& what, int err = errno) {
  throw std::system_error(err, std::generic_category(), what);
}

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

class Mapping {
 public:
  Mapping() = default;
  Mapping(void* addr, size_t bytes) : addr_(addr), bytes_(bytes) {}
  Mapping(Mapping&& o) noexcept : addr_(std::exchange(o.addr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  Mapping& operator=(Mapping&& o) noexcept {
    if (this != &o) {
      reset();
      addr_ = std::exchange(o.addr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() { reset(); }

  // Maps `bytes` of `fd` shared and read-write; throws with `what` on failure.
  static Mapping map_shared(int fd, size_t bytes, const std::string& what, off_t offset = 0) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, offset);
    if (p == MAP_FAILED) throw_errno("mmap " + what);
    return Mapping(p, bytes);
  }

  std::byte* data() const { return static_cast<std::byte*>(addr_); }
  size_t size() const { return bytes_; }
  explicit operator bool() const { return addr_ != nullptr; }
  void reset() {
    if (addr_) ::munmap(addr_, bytes_);
    addr_ = nullptr;
    bytes_ = 0;
  }

 private:
  void* addr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace vmrpc
