// Which host GPUs a VM's guest devices are (guest device i is devices()[i]), and how a stub
// picks them: given (--devices 0,1), or by policy (--devices auto[:N]: the N GPUs of the
// stub's pool that the fewest live VMs use, ties to the lowest index). Each stub records
// its VM's GPUs in <placement dir>/<VM>.gpus and holds a lock on that file while it lives,
// so a stub that died counts for nothing; the choice is made under a lock on the directory,
// so two VMs that start at once do not both take the emptiest GPU.
//
// A suspended VM may be resumed on other GPUs of the same model (vmcudactl resume VM
// --devices LIST): its clients come back there, its new programs start there, and a stub
// process started again (upgrade) keeps them.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "vmrpc/fd.h"

namespace vmcuda::host {

struct PlacementRequest {
  std::vector<int> devices;  // given; empty with auto
  int auto_count = 0;        // auto: how many GPUs
};

// "0,1" or "auto" or "auto:2"; nullopt (and *why) for anything else.
std::optional<PlacementRequest> parse_placement(const std::string& text, std::string* why);

// "a,b,c" (the form --devices takes).
std::string device_list(const std::vector<int>& devices);

// `args` (a stub's command line, without the program) with every -d/--devices option
// replaced by "--devices LIST": how workers and a re-executed stub learn the VM's GPUs.
std::vector<std::string> with_devices(const std::vector<std::string>& args, const std::vector<int>& devices);

class Placement {
 public:
  // `pool`: the GPUs this stub may use (their names, by host index: a move keeps models).
  Placement(std::string vm, std::map<int, std::string> pool) : vm_(std::move(vm)), pool_(std::move(pool)) {}

  // Picks (auto) or checks (given) the VM's GPUs and records them in `dir` ("" : nowhere,
  // and auto counts no other VM). false with *why when a device is not in the pool, a list
  // repeats one, or auto asks for more GPUs than the pool has.
  bool place(const PlacementRequest& request, const std::string& dir, std::string* why);
  // A move: same count, in the pool, distinct, each the same model as the one it replaces.
  bool check_move(const std::vector<int>& to, std::string* why) const;
  void set(const std::vector<int>& devices);  // after a move (recorded again)

  std::vector<int> devices() const;
  std::vector<std::string> names() const;  // "i: model" of each of devices()
  const std::map<int, std::string>& pool() const { return pool_; }

  // How many live VMs (recorded in `dir`, their stub alive) use each GPU of `pool`.
  static std::map<int, int> usage(const std::string& dir, const std::string& except_vm);

 private:
  void record_locked();
  std::string vm_;
  std::map<int, std::string> pool_;
  mutable std::mutex mu_;
  std::vector<int> devices_;
  std::string dir_;
  vmrpc::UniqueFd record_fd_;  // <dir>/<vm>.gpus, locked while this stub lives
};

}  // namespace vmcuda::host
