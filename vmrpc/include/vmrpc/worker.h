// Worker processes: one process serves one slot (HostEndpointOptions::spawn_worker).
// The endpoint's side starts a program with the region and the slot's eventfds as fds
// 3, 4, 5 and the rest on its command line; the worker's side reads them back and runs
// serve_slot() with a service of its own.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "vmrpc/host_endpoint.h"
#include "vmrpc/service.h"

namespace vmrpc {

inline constexpr int kWorkerMemfd = 3;
inline constexpr int kWorkerDoorbellFd = 4;
inline constexpr int kWorkerNotifyFd = 5;
// A SOCK_SEQPACKET socket to the endpoint: the control path (hold, release, control
// requests of the slot service; worker_control.h).
inline constexpr int kWorkerControlFd = 6;
inline constexpr const char* kWorkerFlag = "--vmrpc-worker";
// A worker's exit status when it left its slot because a saved image replaced the region.
inline constexpr int kWorkerExitRegionReplaced = 3;
// A worker's exit status when it ended itself because its client's kernel ran past the
// kernel time limit (the client's calls then fail with kLaunchTimeout).
inline constexpr int kWorkerExitLaunchTimeout = 4;

// Starts `exe` with `args` and the worker arguments of `spec` (kWorkerFlag first, then
// the spec); returns its pid or -1 (errno set). Use as HostEndpointOptions::spawn_worker.
// `extra_fds`: (fd here, fd number in the worker) pairs the service needs besides the slot's;
// targets above kWorkerControlFd, and no target may be another pair's source.
int spawn_worker_process(const std::string& exe, const std::vector<std::string>& args, const WorkerSpec& spec,
                         const std::vector<std::pair<int, int>>& extra_fds = {});

// Whether argv asks for a worker (kWorkerFlag is present).
bool is_worker_invocation(int argc, char** argv);

// Call first of all in a worker: unless VMRPC_WORKER_ASLR=1, re-executes the worker once
// without address-space randomization (personality ADDR_NO_RANDOMIZE), so that its address
// space, and with it where the CUDA driver places module variables, is the same in every
// worker: a client saved in one worker can be restored in a new one (a new stub process).
// Also keeps every thread's allocations in one malloc arena (M_ARENA_MAX=1) for the same
// reason. Returns only when the worker goes on in this process.
void fix_worker_address_space(char** argv);

// The worker's first step, before anything else maps memory (before cuInit, so that the
// driver's address reservations avoid it): maps the region from fd 3 at the address the
// endpoint chose (WorkerSpec::map_address, the 11th worker argument; anywhere when 0 or
// absent). False (and a message on stderr) when that address is taken. run_worker() does
// it itself when it was not done.
bool map_worker_region(int argc, char** argv);

// The worker's side: maps the region from fd 3 (map_worker_region), checks its layout against the
// arguments, opens a slot service from `service` and serves the slot until the client
// releases it (exit status 0) or the endpoint kills the worker. Returns the exit status:
// 2 for bad arguments. The worker dies with its parent (PR_SET_PDEATHSIG).
int run_worker(int argc, char** argv, Service& service);

}  // namespace vmrpc
