#include "vgpu_db/fatbin.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace vgpu_db {
namespace {

// Entry header fields, offsets into the entry header. Checked on nvcc 13.0 output (default,
// -Xfatbin -compress-all, sm_80 + compute_100) and against ZLUDA's FatbinFileHeader; note
// that docs/cuda-runtime-internals.md §2 puts version, arch, flags and uncompressed size
// 4-8 bytes too far.
constexpr uint32_t kEntryKindOffset = 0x00;            // u16
constexpr uint32_t kEntryHeaderSizeOffset = 0x04;      // u32
constexpr uint32_t kEntryPayloadSizeOffset = 0x08;     // u64, padded
constexpr uint32_t kEntryCompressedSizeOffset = 0x10;  // u32, 0 when stored raw
constexpr uint32_t kEntryVersionOffset = 0x18;         // u16 minor, u16 major (PTX ISA 9.0, ELF 1.8)
constexpr uint32_t kEntryArchOffset = 0x1c;            // u32
constexpr uint32_t kEntryFlagsOffset = 0x28;           // u64
constexpr uint32_t kEntryUncompressedOffset = 0x38;    // u64, 0 when stored raw
// The smallest entry header that holds kind, header size and payload size.
constexpr uint32_t kMinEntryHeader = 0x10;

template <typename T>
T load(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);  // entries are not necessarily aligned for T
  return v;
}

// Field `at` of an entry header of `header_size` bytes, or 0 when the header is shorter.
template <typename T>
T field(const unsigned char* entry, uint32_t header_size, uint32_t at) {
  return at + sizeof(T) <= header_size ? load<T>(entry + at) : T{0};
}

std::string format(const char* fmt, auto... args) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

void parse_entries(Fatbin* f, uint16_t header_size) {
  uint64_t off = header_size;
  while (off < f->size) {
    uint64_t left = f->size - off;
    if (left < kMinEntryHeader) {
      f->entries_problem = format("%" PRIu64 " stray bytes at offset %" PRIu64, left, off);
      return;
    }
    const unsigned char* e = f->data + off;
    FatbinEntry entry;
    entry.offset = off;
    entry.kind = load<uint16_t>(e + kEntryKindOffset);
    entry.header_size = load<uint32_t>(e + kEntryHeaderSizeOffset);
    entry.payload_size = load<uint64_t>(e + kEntryPayloadSizeOffset);
    if (entry.header_size < kMinEntryHeader || entry.header_size > left ||
        entry.payload_size > left - entry.header_size) {
      f->entries_problem = format("entry at offset %" PRIu64 " (header %" PRIu32 " bytes, payload %" PRIu64
                                  " bytes) does not fit in the %" PRIu64 " bytes left",
                                  off, entry.header_size, entry.payload_size, left);
      return;
    }
    entry.compressed_size = field<uint32_t>(e, entry.header_size, kEntryCompressedSizeOffset);
    entry.version_minor = field<uint16_t>(e, entry.header_size, kEntryVersionOffset);
    entry.version_major = field<uint16_t>(e, entry.header_size, kEntryVersionOffset + 2);
    entry.arch = field<uint32_t>(e, entry.header_size, kEntryArchOffset);
    entry.flags = field<uint64_t>(e, entry.header_size, kEntryFlagsOffset);
    entry.uncompressed_size = field<uint64_t>(e, entry.header_size, kEntryUncompressedOffset);
    f->entries.push_back(entry);
    off += entry.header_size + entry.payload_size;
  }
}

}  // namespace

std::string FatbinEntry::describe() const {
  const char* compression = (flags & kFlagZstd) ? " zstd" : (flags & kFlagLz4) ? " lz4" : "";
  switch (kind) {
    case kElf:
      return format("sm_%" PRIu32 " ELF%s", arch, compression);
    case kPtx:
      return format("compute_%" PRIu32 " PTX%s", arch, compression);
    default:
      return format("kind %u arch %" PRIu32 "%s", static_cast<unsigned>(kind), arch, compression);
  }
}

bool parse_fatbin(const void* data, uint64_t available, Fatbin* out, std::string* error) {
  *out = Fatbin{};
  if (data == nullptr) {
    *error = "null fatbin pointer";
    return false;
  }
  if (available < sizeof(FatbinHeader)) {
    *error = format("%" PRIu64 " bytes cannot hold a fatbin header", available);
    return false;
  }
  auto* p = static_cast<const unsigned char*>(data);
  FatbinHeader h;
  std::memcpy(&h, p, sizeof h);
  if (h.magic != kFatbinMagic) {
    *error = format("unknown fatbin magic 0x%08" PRIx32 " (expected 0x%08" PRIx32 ")", h.magic, kFatbinMagic);
    return false;
  }
  if (h.header_size < sizeof(FatbinHeader)) {
    *error =
        format("fatbin header size %u is smaller than %zu", static_cast<unsigned>(h.header_size), sizeof(FatbinHeader));
    return false;
  }
  uint64_t limit = available < kMaxFatbinBytes ? available : kMaxFatbinBytes;
  if (h.fat_size > limit || h.header_size > limit - h.fat_size) {
    *error = format("fatbin size %u + %" PRIu64 " is beyond the limit of %" PRIu64 " bytes",
                    static_cast<unsigned>(h.header_size), h.fat_size, limit);
    return false;
  }
  out->data = p;
  out->size = h.header_size + h.fat_size;
  out->version = h.version;
  parse_entries(out, h.header_size);
  return true;
}

bool parse_fatbin_wrapper(const void* wrapper, FatbinImage* out, std::string* error) {
  *out = FatbinImage{};
  if (wrapper == nullptr) {
    *error = "null fatbin wrapper";
    return false;
  }
  FatbinWrapper w;
  std::memcpy(&w, wrapper, sizeof w);
  if (static_cast<uint32_t>(w.magic) != kFatbinWrapperMagic) {
    *error = format("unknown fatbin wrapper magic 0x%08" PRIx32 " (expected 0x%08" PRIx32 ")",
                    static_cast<uint32_t>(w.magic), kFatbinWrapperMagic);
    return false;
  }
  if (w.version != kFatbinWrapperVersion && w.version != kFatbinWrapperLinkVersion) {
    *error = format("unknown fatbin wrapper version %" PRId32 " (known: 1, and 2 for -rdc=true)", w.version);
    return false;
  }
  out->wrapper_version = w.version;
  std::string why;
  if (!parse_fatbin(w.data, UINT64_MAX, &out->fatbin, &why)) {
    *error = "fatbin: " + why;
    return false;
  }
  if (w.version == kFatbinWrapperLinkVersion && w.filename_or_fatbins != nullptr) {
    auto* list = static_cast<void* const*>(w.filename_or_fatbins);
    for (size_t i = 0; list[i] != nullptr; ++i) {
      if (i == kMaxLinkedFatbins) {
        *error = format("more than %zu relocatable fatbins (no NULL terminator?)", kMaxLinkedFatbins);
        return false;
      }
      Fatbin f;
      if (!parse_fatbin(list[i], UINT64_MAX, &f, &why)) {
        *error = format("relocatable fatbin %zu: ", i) + why;
        return false;
      }
      out->relocatables.push_back(std::move(f));
    }
  }
  return true;
}

}  // namespace vgpu_db
