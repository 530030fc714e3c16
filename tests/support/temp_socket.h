// A unique socket path under /tmp for one test.
#pragma once

#include <unistd.h>

#include <atomic>
#include <string>

namespace vmrpc::testing {
inline std::string temp_socket_path(const std::string& tag) {
  static std::atomic<int> n{0};
  return "/tmp/vmrpc-test-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(n++) + ".sock";
}
}  // namespace vmrpc::testing
