// vgpu-db's fatbin parser on synthetic fatbins: the layouts nvcc produces, and broken ones
// that must be rejected or cut short without reading out of bounds (run under ASan).
#include "vgpu_db/fatbin.h"

#include <gtest/gtest.h>

#include "guest-lib/fatbin_builder.h"

namespace {

using vgpu_db::Fatbin;
using vgpu_db::FatbinEntry;
using vgpu_db::FatbinImage;
using vmcuda_test::FatbinBuilder;

TEST(Fatbin, ParsesTypicalNvccFatbin) {
  auto bin = vmcuda_test::typical_fatbin();
  Fatbin f;
  std::string error;
  ASSERT_TRUE(vgpu_db::parse_fatbin(bin.data(), UINT64_MAX, &f, &error)) << error;
  EXPECT_EQ(f.size, 16u + 0x40 + 256 + 0x50 + 64);
  EXPECT_EQ(f.version, 1);
  EXPECT_TRUE(f.entries_problem.empty()) << f.entries_problem;
  ASSERT_EQ(f.entries.size(), 2u);

  const FatbinEntry& elf = f.entries[0];
  EXPECT_EQ(elf.kind, FatbinEntry::kElf);
  EXPECT_EQ(elf.offset, 16u);
  EXPECT_EQ(elf.header_size, 0x40u);
  EXPECT_EQ(elf.payload_size, 256u);
  EXPECT_EQ(elf.arch, 90u);
  EXPECT_EQ(elf.version_major, 1);
  EXPECT_EQ(elf.version_minor, 8);
  EXPECT_FALSE(elf.compressed());
  EXPECT_EQ(elf.describe(), "sm_90 ELF");

  const FatbinEntry& ptx = f.entries[1];
  EXPECT_EQ(ptx.kind, FatbinEntry::kPtx);
  EXPECT_EQ(ptx.offset, 16u + 0x40 + 256);
  EXPECT_EQ(ptx.compressed_size, 62u);
  EXPECT_EQ(ptx.uncompressed_size, 300u);
  EXPECT_EQ(ptx.version_major, 9);
  EXPECT_TRUE(ptx.compressed());
  EXPECT_EQ(ptx.describe(), "compute_90 PTX zstd");
}

TEST(Fatbin, SizeIsHeaderSizePlusFatSize) {
  // A header larger than 16 bytes moves the entries, and counts in the size.
  auto bin = FatbinBuilder().entry({.payload_bytes = 8}).build(0xBA55ED50, 32);
  Fatbin f;
  std::string error;
  ASSERT_TRUE(vgpu_db::parse_fatbin(bin.data(), UINT64_MAX, &f, &error)) << error;
  EXPECT_EQ(f.size, 32u + 0x40 + 8);
  ASSERT_EQ(f.entries.size(), 1u);
  EXPECT_EQ(f.entries[0].offset, 32u);
}

TEST(Fatbin, DescribesLz4AndUnknownKinds) {
  auto bin = FatbinBuilder()
                 .entry({.kind = 2, .arch = 100, .flags = 0x2011, .payload_bytes = 16})
                 .entry({.kind = 7, .arch = 120, .payload_bytes = 16})
                 .build();
  Fatbin f;
  std::string error;
  ASSERT_TRUE(vgpu_db::parse_fatbin(bin.data(), UINT64_MAX, &f, &error)) << error;
  ASSERT_EQ(f.entries.size(), 2u);
  EXPECT_EQ(f.entries[0].describe(), "sm_100 ELF lz4");
  EXPECT_EQ(f.entries[1].describe(), "kind 7 arch 120");
}

TEST(Fatbin, ShortEntryHeaderReadsMissingFieldsAsZero) {
  // A 0x20-byte entry header has kind, sizes, version and arch, but no flags.
  auto bin = FatbinBuilder().entry({.header_size = 0x20, .arch = 80, .flags = 0x8011, .payload_bytes = 8}).build();
  Fatbin f;
  std::string error;
  ASSERT_TRUE(vgpu_db::parse_fatbin(bin.data(), UINT64_MAX, &f, &error)) << error;
  ASSERT_EQ(f.entries.size(), 1u);
  EXPECT_EQ(f.entries[0].arch, 80u);
  EXPECT_EQ(f.entries[0].flags, 0u);
  EXPECT_EQ(f.entries[0].uncompressed_size, 0u);
}

TEST(Fatbin, EmptyFatbinHasNoEntries) {
  auto bin = FatbinBuilder().build();
  Fatbin f;
  std::string error;
  ASSERT_TRUE(vgpu_db::parse_fatbin(bin.data(), UINT64_MAX, &f, &error)) << error;
  EXPECT_EQ(f.size, 16u);
  EXPECT_TRUE(f.entries.empty());
  EXPECT_TRUE(f.entries_problem.empty());
}

TEST(Fatbin, RejectsWhatIsNotAFatbin) {
  Fatbin f;
  std::string error;
  EXPECT_FALSE(vgpu_db::parse_fatbin(nullptr, UINT64_MAX, &f, &error));
  EXPECT_NE(error.find("null"), std::string::npos);

  auto bad_magic = FatbinBuilder().entry({}).build(0x12345678);
  EXPECT_FALSE(vgpu_db::parse_fatbin(bad_magic.data(), UINT64_MAX, &f, &error));
  EXPECT_NE(error.find("0x12345678"), std::string::npos) << error;
  EXPECT_NE(error.find("0xba55ed50"), std::string::npos) << error;

  auto small_header = FatbinBuilder().entry({}).build(0xBA55ED50, 8);
  EXPECT_FALSE(vgpu_db::parse_fatbin(small_header.data(), UINT64_MAX, &f, &error));
  EXPECT_NE(error.find("header size 8"), std::string::npos) << error;

  auto huge = FatbinBuilder().build(0xBA55ED50, 16, int64_t{1} << 40);
  EXPECT_FALSE(vgpu_db::parse_fatbin(huge.data(), UINT64_MAX, &f, &error));
  EXPECT_NE(error.find("limit"), std::string::npos) << error;

  // A fatbin that claims more bytes than the caller says are there.
  auto bin = FatbinBuilder().entry({.payload_bytes = 64}).build();
  EXPECT_FALSE(vgpu_db::parse_fatbin(bin.data(), 16 + 0x40, &f, &error));
  EXPECT_FALSE(vgpu_db::parse_fatbin(bin.data(), 10, &f, &error));
  EXPECT_TRUE(vgpu_db::parse_fatbin(bin.data(), 16 + 0x40 + 64, &f, &error)) << error;
}

TEST(Fatbin, InconsistentEntryTableStopsEarlyWithoutFailing) {
  // The second entry claims a payload running past the end of the fatbin: the parser keeps
  // the first entry, says why it stopped, and reads nothing beyond the fatbin.
  std::vector<unsigned char> lying_entry(0x40, 0);
  uint16_t kind = 2;
  uint32_t header_size = 0x40;
  uint64_t payload = 1000;
  std::memcpy(lying_entry.data(), &kind, 2);
  std::memcpy(lying_entry.data() + 4, &header_size, 4);
  std::memcpy(lying_entry.data() + 8, &payload, 8);
  auto bin = FatbinBuilder().entry({.payload_bytes = 16}).raw(lying_entry).build();
  Fatbin f;
  std::string error;
  ASSERT_TRUE(vgpu_db::parse_fatbin(bin.data(), UINT64_MAX, &f, &error)) << error;
  EXPECT_EQ(f.entries.size(), 1u);
  EXPECT_NE(f.entries_problem.find("does not fit"), std::string::npos) << f.entries_problem;

  // An entry header smaller than the smallest known one.
  std::vector<unsigned char> tiny(16, 0);
  uint32_t tiny_size = 4;
  std::memcpy(tiny.data(), &kind, 2);
  std::memcpy(tiny.data() + 4, &tiny_size, 4);
  auto bin2 = FatbinBuilder().raw(tiny).build();
  ASSERT_TRUE(vgpu_db::parse_fatbin(bin2.data(), UINT64_MAX, &f, &error)) << error;
  EXPECT_TRUE(f.entries.empty());
  EXPECT_FALSE(f.entries_problem.empty());

  // Trailing bytes too few for an entry header.
  auto bin3 = FatbinBuilder().entry({.payload_bytes = 8}).raw({1, 2, 3}).build();
  ASSERT_TRUE(vgpu_db::parse_fatbin(bin3.data(), UINT64_MAX, &f, &error)) << error;
  EXPECT_EQ(f.entries.size(), 1u);
  EXPECT_NE(f.entries_problem.find("3 stray bytes"), std::string::npos) << f.entries_problem;
}

TEST(FatbinWrapper, Version1) {
  auto bin = vmcuda_test::typical_fatbin();
  auto w = vmcuda_test::wrap(bin);
  FatbinImage image;
  std::string error;
  ASSERT_TRUE(vgpu_db::parse_fatbin_wrapper(&w, &image, &error)) << error;
  EXPECT_EQ(image.wrapper_version, 1);
  EXPECT_EQ(static_cast<const void*>(image.fatbin.data), static_cast<const void*>(bin.data()));
  EXPECT_EQ(image.fatbin.entries.size(), 2u);
  EXPECT_TRUE(image.relocatables.empty());

  // Version 1's filename_or_fatbins is a file name, never a fatbin list.
  char name[] = "k.cu";
  w.filename_or_fatbins = name;
  ASSERT_TRUE(vgpu_db::parse_fatbin_wrapper(&w, &image, &error)) << error;
  EXPECT_TRUE(image.relocatables.empty());
}

TEST(FatbinWrapper, Version2CarriesTheRelocatableFatbins) {
  auto linked = vmcuda_test::typical_fatbin();
  auto a = FatbinBuilder().entry({.arch = 90, .payload_bytes = 32}).build();
  auto b = FatbinBuilder().entry({.arch = 90, .payload_bytes = 48}).entry({.kind = 1, .header_size = 0x50}).build();
  void* list[] = {a.data(), b.data(), nullptr};
  auto w = vmcuda_test::wrap(linked, 2, list);
  FatbinImage image;
  std::string error;
  ASSERT_TRUE(vgpu_db::parse_fatbin_wrapper(&w, &image, &error)) << error;
  EXPECT_EQ(image.wrapper_version, 2);
  ASSERT_EQ(image.relocatables.size(), 2u);
  EXPECT_EQ(image.relocatables[0].entries.size(), 1u);
  EXPECT_EQ(image.relocatables[1].entries.size(), 2u);
  EXPECT_EQ(static_cast<const void*>(image.relocatables[1].data), static_cast<const void*>(b.data()));

  // A NULL list is an -rdc link of nothing relocatable.
  w.filename_or_fatbins = nullptr;
  ASSERT_TRUE(vgpu_db::parse_fatbin_wrapper(&w, &image, &error)) << error;
  EXPECT_TRUE(image.relocatables.empty());

  // One bad relocatable fatbin fails the wrapper, naming which.
  auto bad = FatbinBuilder().build(0xdeadbeef);
  void* bad_list[] = {a.data(), bad.data(), nullptr};
  w.filename_or_fatbins = bad_list;
  EXPECT_FALSE(vgpu_db::parse_fatbin_wrapper(&w, &image, &error));
  EXPECT_NE(error.find("relocatable fatbin 1"), std::string::npos) << error;
}

TEST(FatbinWrapper, RejectsUnknownWrappers) {
  auto bin = vmcuda_test::typical_fatbin();
  FatbinImage image;
  std::string error;
  EXPECT_FALSE(vgpu_db::parse_fatbin_wrapper(nullptr, &image, &error));

  auto w = vmcuda_test::wrap(bin);
  w.magic = 0x11223344;
  EXPECT_FALSE(vgpu_db::parse_fatbin_wrapper(&w, &image, &error));
  EXPECT_NE(error.find("wrapper magic 0x11223344"), std::string::npos) << error;

  w = vmcuda_test::wrap(bin, 3);
  EXPECT_FALSE(vgpu_db::parse_fatbin_wrapper(&w, &image, &error));
  EXPECT_NE(error.find("version 3"), std::string::npos) << error;

  w = vmcuda_test::wrap(bin);
  w.data = nullptr;
  EXPECT_FALSE(vgpu_db::parse_fatbin_wrapper(&w, &image, &error));
  EXPECT_NE(error.find("null"), std::string::npos) << error;

  auto bad = FatbinBuilder().build(0x0BADF00D);
  w = vmcuda_test::wrap(bad);
  EXPECT_FALSE(vgpu_db::parse_fatbin_wrapper(&w, &image, &error));
  EXPECT_NE(error.find("fatbin magic 0x0badf00d"), std::string::npos) << error;
}

}  // namespace
