// The built guest libcuda.so.1 (VMCUDA_CUDA_PATH, from the test's CMake target), loaded with
// dlopen for tests that drive it against vmcuda-stub in their own process, and its exports.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>

namespace vmcuda::host::test {

inline void* libcuda() {
  static void* h = dlopen(VMCUDA_CUDA_PATH, RTLD_NOW | RTLD_LOCAL);
  return h;
}
template <class F>
F fn(const char* name) {
  auto f = reinterpret_cast<F>(dlsym(libcuda(), name));
  EXPECT_NE(f, nullptr) << name;
  return f;
}

}  // namespace vmcuda::host::test
