// The integrity check's answer (guest-lib/src/export_integrity.cc): MD2 against RFC 1319's
// test suite, the keyed states against the values ZLUDA's dark_api tests publish (its
// "pass2" and "pass3": the state after the key and after the first message part), and the
// answer's shape. End to end it is checked by the static-runtime programs in CI
// (cuda_*_static): NVIDIA's runtime refuses a driver whose answer differs.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "driver_export_tables.h"

using vmcuda::guest::export_tables::DeviceIds;
using vmcuda::guest::export_tables::IntegrityInputs;
using vmcuda::guest::export_tables::integrity_answer;
using vmcuda::guest::export_tables::Md2;

namespace {

std::string hex(const uint8_t* p, size_t n) {
  std::string s;
  char b[3];
  for (size_t i = 0; i < n; ++i) std::snprintf(b, sizeof b, "%02x", p[i]), s += b;
  return s;
}

std::string md2(const std::string& text) {
  Md2 m;
  m.update(text.data(), text.size());
  auto d = m.finish();
  return hex(d.data(), d.size());
}

constexpr uint8_t kKey[16] = {0x14, 0x6A, 0xDD, 0xAE, 0x53, 0xA9, 0xA7, 0x52,
                              0xAA, 0x08, 0x41, 0x36, 0x0B, 0xF5, 0x5A, 0x9F};

TEST(ExportIntegrity, Md2MatchesRfc1319) {
  EXPECT_EQ(md2(""), "8350e5a3e24c153df2275c9f80692773");
  EXPECT_EQ(md2("a"), "32ec01ec4a6dac72c0ab96fb34c0b5d1");
  EXPECT_EQ(md2("abc"), "da853b0d3f88d99b30283a69e6ded6bb");
  EXPECT_EQ(md2("message digest"), "ab4f496bfb2a530b219ff33031fe06b0");
  EXPECT_EQ(md2("abcdefghijklmnopqrstuvwxyz"), "4e8ddff3650292ab5a4108c3aa47940b");
  EXPECT_EQ(md2("12345678901234567890123456789012345678901234567890123456789012345678901234567890"),
            "d5976f79d83d3a0dc9806c3c66f3efd8");
}

// The state after the key (xor 0x36), then after a first message part, as ZLUDA's tests
// give them (dark_api/src/lib.rs, integrity_check_pass2 and _pass3).
TEST(ExportIntegrity, KeyedStatesMatchPublishedOnes) {
  Md2 m;
  m.update(kKey, sizeof kKey, 0x36);
  const uint8_t after_key[66] = {
      0x8b, 0x21, 0x9a, 0x49, 0xe8, 0x6d, 0x1a, 0xee, 0xf2, 0x37, 0xf9, 0xb5, 0x4a, 0x8c, 0x3c, 0x75, 0xc7,
      0x1e, 0xee, 0x21, 0xcf, 0x29, 0x8a, 0xe5, 0x13, 0x83, 0xf4, 0xec, 0x33, 0x04, 0xe2, 0xfd, 0xb0, 0x2f,
      0x09, 0x01, 0x4f, 0xf7, 0x68, 0x6d, 0x69, 0x46, 0x43, 0x7e, 0xb6, 0x2b, 0x21, 0xed, 0x57, 0xa1, 0x10,
      0x86, 0x0e, 0x60, 0x44, 0x1e, 0x70, 0x5f, 0x67, 0xd1, 0xeb, 0x67, 0xa1, 0x3d, 0x00, 0x3d};
  EXPECT_EQ(hex(reinterpret_cast<const uint8_t*>(&m), 66), hex(after_key, 66));
  const IntegrityInputs in{0x2f30,
                           12082,
                           0x002fa423,
                           0xf79c1000,
                           reinterpret_cast<const void*>(0x00007ffff6958240),
                           reinterpret_cast<const void*>(0x00007ffff6958220),
                           reinterpret_cast<const void*>(0x00007ffff2aaf4a0),
                           0x682b9cee};
  m.update(&in, sizeof in);
  const uint8_t after_inputs[66] = {
      0x0a, 0xfd, 0xab, 0xc9, 0xff, 0x9b, 0xa0, 0xbe, 0x4d, 0x30, 0x32, 0x82, 0x74, 0x4f, 0xa7, 0x48, 0x9d,
      0x23, 0x82, 0xa3, 0x87, 0xfa, 0x6c, 0xdb, 0x92, 0x49, 0xd9, 0xb5, 0x4b, 0x2b, 0x5e, 0x51, 0x6e, 0xf7,
      0xf9, 0x4d, 0x28, 0x8a, 0x64, 0x06, 0x19, 0xb3, 0xe6, 0xbe, 0xa4, 0xec, 0x7e, 0x54, 0x64, 0x28, 0xd9,
      0xe1, 0xd4, 0x34, 0xc0, 0xa9, 0x49, 0x88, 0xc9, 0x61, 0x58, 0xdd, 0x66, 0x74, 0x00, 0x74};
  EXPECT_EQ(hex(reinterpret_cast<const uint8_t*>(&m), 66), hex(after_inputs, 66));
}

TEST(ExportIntegrity, AnswerIsHmacMd2AndDependsOnEveryInput) {
  IntegrityInputs in{13000, 13002, 1234, 5678, &in, &kKey, &kKey[1], 1700000000};
  DeviceIds dev{};
  dev.pci_bus = 6;
  const auto a = integrity_answer(in, {&dev, 1});
  // HMAC-MD2 by hand.
  Md2 inner, outer;
  inner.update(kKey, 16, 0x36);
  inner.update(&in, sizeof in);
  inner.update(&dev, sizeof dev);
  const auto id = inner.finish();
  outer.update(kKey, 16, 0x5c);
  outer.update(id.data(), 16);
  const auto d = outer.finish();
  uint64_t expect[2];
  std::memcpy(expect, d.data(), 16);
  EXPECT_EQ(a[0], expect[0]);
  EXPECT_EQ(a[1], expect[1]);
  auto other = in;
  other.tid ^= 1;
  EXPECT_NE(integrity_answer(other, {&dev, 1}), a);
  DeviceIds dev2 = dev;
  dev2.uuid[15] ^= 1;
  EXPECT_NE(integrity_answer(in, {&dev2, 1}), a);
  EXPECT_NE(integrity_answer(in, {}), a);
}

// Versions ending in 0 and 1 have fixed answers (the runtime's first two calls).
TEST(ExportIntegrity, FixedAnswersForVersionsEndingIn0And1) {
  IntegrityInputs in{13000, 13000, 1, 2, nullptr, nullptr, nullptr, 3};
  EXPECT_EQ(integrity_answer(in, {}), (std::array<uint64_t, 2>{0x3341181C03CB675Cull, 0x8ED383AA1F4CD1E8ull}));
  in.version = 13001;
  EXPECT_EQ(integrity_answer(in, {}), (std::array<uint64_t, 2>{0x1841181C03CB675Cull, 0x8ED383AA1F4CD1E8ull}));
}

}  // namespace
