// Builds synthetic fatbins and fatbin wrappers in memory, laid out as nvcc 13 lays them out
// (docs/cuda-runtime-internals.md §2; entry header offsets as in vgpu-db/src/fatbin.cc).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

namespace vmcuda_test {

struct EntrySpec {
  uint16_t kind = 2;            // 1 PTX, 2 ELF
  uint32_t header_size = 0x40;  // 0x40 ELF, 0x50 PTX
  uint32_t arch = 90;
  uint64_t flags = 0x11;  // 64-bit, Linux
  uint32_t payload_bytes = 64;
  uint32_t compressed_size = 0;
  uint64_t uncompressed_size = 0;
  uint16_t version_major = 1, version_minor = 8;
};

class FatbinBuilder {
 public:
  FatbinBuilder& entry(const EntrySpec& e) {
    std::vector<unsigned char> h(e.header_size, 0);
    auto put = [&](size_t at, auto v) {
      if (at + sizeof v <= h.size()) std::memcpy(h.data() + at, &v, sizeof v);
    };
    put(0x00, e.kind);
    put(0x02, uint16_t{0x0101});
    put(0x04, e.header_size);
    put(0x08, uint64_t{e.payload_bytes});
    put(0x10, e.compressed_size);
    put(0x18, e.version_minor);
    put(0x1a, e.version_major);
    put(0x1c, e.arch);
    put(0x28, e.flags);
    put(0x38, e.uncompressed_size);
    body_.insert(body_.end(), h.begin(), h.end());
    for (uint32_t i = 0; i < e.payload_bytes; ++i) body_.push_back(static_cast<unsigned char>(i));
    return *this;
  }
  /// Appends raw bytes after the entries (to make broken fatbins).
  FatbinBuilder& raw(const std::vector<unsigned char>& bytes) {
    body_.insert(body_.end(), bytes.begin(), bytes.end());
    return *this;
  }

  /// The fatbin, 8-byte aligned as in .nv_fatbin. `fat_size_override` replaces the header's
  /// fat_size (to lie about the size).
  std::vector<uint64_t> build(uint32_t magic = 0xBA55ED50, uint16_t header_size = 16,
                              int64_t fat_size_override = -1) const {
    std::vector<unsigned char> bytes(16, 0);
    uint16_t version = 1;
    uint64_t fat_size = fat_size_override >= 0 ? static_cast<uint64_t>(fat_size_override) : body_.size();
    std::memcpy(bytes.data() + 0, &magic, 4);
    std::memcpy(bytes.data() + 4, &version, 2);
    std::memcpy(bytes.data() + 6, &header_size, 2);
    std::memcpy(bytes.data() + 8, &fat_size, 8);
    bytes.resize(header_size > 16 ? header_size : 16, 0);
    bytes.insert(bytes.end(), body_.begin(), body_.end());
    std::vector<uint64_t> out((bytes.size() + 7) / 8, 0);
    std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
  }

  size_t body_size() const { return body_.size(); }

 private:
  std::vector<unsigned char> body_;
};

/// __fatBinC_Wrapper_t.
struct Wrapper {
  int32_t magic = static_cast<int32_t>(0x466243B1);
  int32_t version = 1;
  const unsigned long long* data = nullptr;
  void* filename_or_fatbins = nullptr;
};

inline Wrapper wrap(const std::vector<uint64_t>& fatbin, int32_t version = 1, void* fatbins = nullptr) {
  Wrapper w;
  w.version = version;
  w.data = reinterpret_cast<const unsigned long long*>(fatbin.data());
  w.filename_or_fatbins = fatbins;
  return w;
}

/// A typical nvcc 13 fatbin: an sm_90 cubin and zstd-compressed compute_90 PTX.
inline std::vector<uint64_t> typical_fatbin() {
  return FatbinBuilder()
      .entry({.kind = 2, .header_size = 0x40, .arch = 90, .flags = 0x11, .payload_bytes = 256})
      .entry({.kind = 1,
              .header_size = 0x50,
              .arch = 90,
              .flags = 0x8011,
              .payload_bytes = 64,
              .compressed_size = 62,
              .uncompressed_size = 300,
              .version_major = 9,
              .version_minor = 0})
      .build();
}

}  // namespace vmcuda_test
