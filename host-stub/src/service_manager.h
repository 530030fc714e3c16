// vmcuda-stub under a service manager (systemd, Type=notify): readiness and status lines,
// and the file descriptor store that keeps a VM's connections (its socket, shared region
// and eventfds) across a restart or a crash of the stub (docs/running.md, "Restarting the
// stub"). Outside a service manager (no $NOTIFY_SOCKET) every call does nothing.
#pragma once

#include <string>
#include <vector>

#include "vmrpc/host_endpoint.h"

namespace vmcuda::host::service_manager {

// Whether a service manager listens ($NOTIFY_SOCKET): then the stub keeps its fds there.
bool present();
// READY=1 with a status line; STATUS= alone; STOPPING=1.
void ready(const std::string& status);
void status(const std::string& status);
void stopping(const std::string& status);
// The endpoint's fd store hooks (FDSTORE=1 / FDSTOREREMOVE=1, FDNAME=name). A store the unit
// does not allow (FileDescriptorStoreMax=0) is logged once.
void store_fd(const std::string& name, int fd);
void unstore_fd(const std::string& name);
// The fds kept from the stub process before this one (LISTEN_FDS, LISTEN_FDNAMES); they
// leave the environment, so that workers do not see them.
std::vector<vmrpc::NamedFd> inherited_fds();

}  // namespace vmcuda::host::service_manager
