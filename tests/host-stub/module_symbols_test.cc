// module_data_symbols (host-stub/src/module_symbols.h) on nvcc 13 output checked in under
// data/ (module_symbols.cu built with `nvcc -fatbin -gencode arch=compute_90,code=sm_90
// -gencode arch=compute_90,code=compute_90` and `nvcc -ptx -arch=sm_90`), and on damaged
// copies of it.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "module_symbols.h"

namespace vmcuda::host {
namespace {

std::vector<std::byte> read(const std::string& name) {
  std::ifstream f(std::string(VMCUDA_TEST_DATA) + "/" + name, std::ios::binary);
  std::vector<char> c{std::istreambuf_iterator<char>(f), {}};
  std::vector<std::byte> b(c.size());
  std::memcpy(b.data(), c.data(), c.size());
  return b;
}

const std::vector<std::string> kAll = {"g_a", "g_b", "g_c", "m_x", "s_hidden"};

TEST(ModuleSymbols, EveryVariableOfAFatbinIncludingStaticAndManagedOnes) {
  const auto image = read("module_symbols.fatbin");
  ASSERT_GT(image.size(), 1000u);
  EXPECT_EQ(module_data_symbols(image).names, kAll);
}

TEST(ModuleSymbols, PtxText) {
  auto image = read("module_symbols.ptx");
  image.push_back(std::byte{0});
  EXPECT_EQ(module_data_symbols(image).names, kAll);
}

TEST(ModuleSymbols, DamagedImagesNeverReadOutside) {
  const auto image = read("module_symbols.fatbin");
  for (size_t cut = 0; cut < image.size(); cut += 7) {
    std::vector<std::byte> part(image.begin(), image.begin() + static_cast<long>(cut));
    module_data_symbols(part);  // must not crash (ASan builds: must not read past `part`)
  }
  for (size_t at = 0; at < image.size(); at += 3) {
    auto bad = image;
    bad[at] = static_cast<std::byte>(~static_cast<unsigned char>(bad[at]));
    module_data_symbols(bad);
  }
  SUCCEED();
}

}  // namespace
}  // namespace vmcuda::host
