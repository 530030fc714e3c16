// The fatbins nvcc embeds in a program, as handed to __cudaRegisterFatBinary
// (docs/cuda-runtime-internals.md §1-2): a wrapper (fatbinary_section.h) pointing at a fatbin
// (a header, then entries: one cubin or PTX per architecture). Parsing only reads and checks;
// nothing is copied or decompressed. The fatbin stays in the application's image (section
// .nv_fatbin) until that image is unloaded, which is after its __cudaUnregisterFatBinary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace vgpu_db {

inline constexpr uint32_t kFatbinWrapperMagic = 0x466243B1;  // FATBINC_MAGIC
inline constexpr int32_t kFatbinWrapperVersion = 1;          // FATBINC_VERSION: one translation unit
inline constexpr int32_t kFatbinWrapperLinkVersion = 2;      // FATBINC_LINK_VERSION: -rdc=true
inline constexpr uint32_t kFatbinMagic = 0xBA55ED50;

/// Sanity limits: a corrupted header must not make the parser walk off into memory.
/// These are far above anything nvcc produces (one module's fatbin, and the relocatable
/// fatbins of one -rdc link).
inline constexpr uint64_t kMaxFatbinBytes = uint64_t{1} << 32;
inline constexpr size_t kMaxLinkedFatbins = 1 << 16;

/// __fatBinC_Wrapper_t.
struct FatbinWrapper {
  int32_t magic;                   ///< kFatbinWrapperMagic
  int32_t version;                 ///< kFatbinWrapperVersion or kFatbinWrapperLinkVersion
  const unsigned long long* data;  ///< the fatbin (a FatbinHeader)
  void* filename_or_fatbins;       ///< version 2: NULL-terminated array of relocatable fatbins
};
static_assert(sizeof(FatbinWrapper) == 24);

/// The fatbin header. The whole fatbin is header_size + fat_size bytes.
struct FatbinHeader {
  uint32_t magic;        ///< kFatbinMagic
  uint16_t version;      ///< 1
  uint16_t header_size;  ///< 0x10
  uint64_t fat_size;     ///< bytes of entries after the header
};
static_assert(sizeof(FatbinHeader) == 16);

/// One entry of a fatbin, read from its entry header (fields past the entry's header size
/// read as 0).
struct FatbinEntry {
  enum Kind : uint16_t { kPtx = 1, kElf = 2 };
  static constexpr uint64_t kFlagLz4 = 0x2000;
  static constexpr uint64_t kFlagZstd = 0x8000;

  uint16_t kind = 0;           ///< kPtx, kElf, or something newer
  uint16_t version_major = 0;  ///< PTX ISA version (9.0) or ELF entry version (1.8)
  uint16_t version_minor = 0;
  uint32_t arch = 0;               ///< 90 = sm_90 (compute_90 for PTX)
  uint64_t offset = 0;             ///< of the entry header, from the start of the fatbin
  uint32_t header_size = 0;        ///< the payload starts this far after `offset`
  uint64_t payload_size = 0;       ///< padded, as stored
  uint32_t compressed_size = 0;    ///< bytes of compressed payload; 0 when stored raw
  uint64_t flags = 0;              ///< 0x1 64-bit, 0x2 debug, 0x10 Linux, kFlagLz4, kFlagZstd
  uint64_t uncompressed_size = 0;  ///< 0 when stored raw

  bool compressed() const { return (flags & (kFlagLz4 | kFlagZstd)) != 0; }
  /// "sm_90 ELF", "compute_90 PTX zstd", "kind 7 arch 90".
  std::string describe() const;
};

/// A fatbin located in memory.
struct Fatbin {
  const unsigned char* data = nullptr;
  uint64_t size = 0;     ///< header_size + fat_size
  uint16_t version = 0;  ///< header version
  std::vector<FatbinEntry> entries;
  /// Empty when the entry table is consistent. Otherwise why it is not; the fatbin is still
  /// usable as a whole (the driver parses it again), only `entries` stops early.
  std::string entries_problem;
};

/// Reads and checks a fatbin at `data`, of which at most `available` bytes may be read
/// (pass SIZE_MAX for an image in this process, whose size only its header tells).
/// Returns false with `*error` set when this is not a fatbin (null, wrong magic, header size
/// too small, size beyond kMaxFatbinBytes or `available`).
bool parse_fatbin(const void* data, uint64_t available, Fatbin* out, std::string* error);

/// What __cudaRegisterFatBinary was given.
struct FatbinImage {
  int32_t wrapper_version = 0;
  Fatbin fatbin;                     ///< the (linked) fatbin
  std::vector<Fatbin> relocatables;  ///< version 2 only: the prelinked fatbins, in order
};

/// Reads and checks a __fatBinC_Wrapper_t and the fatbins it points at. Returns false with
/// `*error` set when the wrapper or its fatbin is not recognized; a bad relocatable fatbin
/// of a version-2 wrapper also fails it.
bool parse_fatbin_wrapper(const void* wrapper, FatbinImage* out, std::string* error);

}  // namespace vgpu_db
