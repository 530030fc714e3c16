#include "service_manager.h"

#include <systemd/sd-daemon.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "vmrpc/log.h"

namespace vmcuda::host::service_manager {

bool present() {
  const char* s = std::getenv("NOTIFY_SOCKET");
  return s && *s;
}

namespace {
void notify(const std::string& text) {
  if (!present()) return;
  if (int r = sd_notify(0, text.c_str()); r < 0)
    VMRPC_LOG(kWarn, "stub", "cannot reach the service manager (" + std::string(std::strerror(-r)) + ")");
}
}  // namespace

void ready(const std::string& s) { notify("READY=1\nSTATUS=" + s); }
void status(const std::string& s) { notify("STATUS=" + s); }
void stopping(const std::string& s) { notify("STOPPING=1\nSTATUS=" + s); }

void store_fd(const std::string& name, int fd) {
  if (!present()) return;
  const std::string msg = "FDSTORE=1\nFDNAME=" + name;
  if (int r = sd_pid_notify_with_fds(0, 0, msg.c_str(), &fd, 1); r < 0) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      VMRPC_LOG(kWarn, "stub", "the service manager does not keep this stub's fds (" + std::string(std::strerror(-r)) +
                                   "): a restart of the stub will cost the VM its device; set "
                                   "FileDescriptorStoreMax= in the unit (qemu-config/vmcuda-stub@.service)");
  }
}

void unstore_fd(const std::string& name) { notify("FDSTOREREMOVE=1\nFDNAME=" + name); }

std::vector<vmrpc::NamedFd> inherited_fds() {
  std::vector<vmrpc::NamedFd> out;
  char** names = nullptr;
  const int n = sd_listen_fds_with_names(1, &names);  // 1: unsets LISTEN_* (workers must not see them)
  if (n <= 0) return out;
  for (int i = 0; i < n; ++i) {
    out.push_back({names && names[i] ? names[i] : "", SD_LISTEN_FDS_START + i});
    if (names) std::free(names[i]);
  }
  std::free(names);
  return out;
}

}  // namespace vmcuda::host::service_manager
