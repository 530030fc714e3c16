// What `vmcudactl` does to one VM (one vmcuda-stub): status, suspend, resume, save and
// restore of all its clients together, through the endpoint's control path (each client's
// requests run on its own service thread, in its worker process under --isolation process).
//
// Suspend is all or nothing: every client is held at a call boundary first; if one does
// not get there in time, or one's state cannot be written, the others are resumed and the
// VM runs on as before. While suspended, the holds stay: a guest that calls just waits.
//
// A saved VM is a directory: `manifest.json` (VM, devices, each connection's region image
// token, clients) and one state file per client (client-<connection>-<slot>.state, striped:
// that file and client-<connection>-<slot>.state.1 .. .S-1, state_stream.h).
//
// VM snapshots (docs/snapshots.md): a save writes a new image token into each connection's
// region, so the VM image QEMU saves next (master=on) names this directory; the stub indexes
// it under its state directory (saved/<token>). When a region is later replaced by that
// image (virsh restore, a snapshot revert; also in a new stub process), adopt_restored()
// finds the directory by the token and brings each client back from its file, into the same
// slot; a client whose state is not found gets a clear error on its next call.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "client_control.h"
#include "vmrpc/host_endpoint.h"

namespace vmcuda::host {

struct VmClientStatus {
  uint64_t connection = 0;
  client_control::Reply reply;  // its status (reply.status), from a snapshot
  int worker_pid = -1;
};

struct VmStatus {
  std::string vm;
  std::string state;  // running, suspended, suspending, resuming, saving, restoring
  std::vector<VmClientStatus> clients;
  uint64_t device_bytes = 0;  // all clients'
  uint64_t module_bytes = 0;  // all clients' modules, as charged (module.cc)
  // The VM's device memory quota and what its ledger holds (vm_ledger.h); ~0: no quota.
  uint64_t quota_bytes = ~0ull;
  uint64_t charged_bytes = 0;
  uint64_t host_quota_bytes = ~0ull;  // the VM's host memory bound (vm_ledger.h kHost) and its use
  uint64_t host_charged_bytes = 0;
};

class VmControl {
 public:
  // The VM's ledger, for status() (set once, before the control socket serves).
  void set_ledger(std::shared_ptr<class VmLedger> ledger) { ledger_ = std::move(ledger); }
  // The VM's GPUs (set once, before the control socket serves): a resume or restore may
  // move the VM to other GPUs of the same models (`to`).
  void set_placement(class Placement* placement) { placement_ = placement; }
  // What the policy file says of the VM, for status (policy.h).
  struct PolicyInfo {
    std::string source, profile;
    uint32_t weight = 1;
  };
  void set_policy_info(PolicyInfo info) {
    std::lock_guard l(state_mu_);
    policy_info_ = std::move(info);
  }
  PolicyInfo policy_info() {
    std::lock_guard l(state_mu_);
    return policy_info_;
  }
  // Before this process hands the VM to the next one (restart, upgrade): no connection is
  // accepted any more; those that come wait in the socket's backlog for the next process.
  bool stop_accepting(std::chrono::milliseconds timeout) { return endpoint_.stop_accepting(timeout); }
  void resume_accepting() { endpoint_.resume_accepting(); }
  // phase, bytes done, bytes in all (0: unknown)
  using Progress = std::function<void(const std::string& phase, uint64_t done, uint64_t total)>;

  // `state_dir`: where saved VMs are indexed by image token ("" : not indexed; a restore
  // then needs `vmcudactl restore DIR` first).
  VmControl(vmrpc::HostEndpoint& endpoint, std::string vm, std::vector<std::string> gpus,
            std::chrono::milliseconds quiesce_timeout = std::chrono::seconds(10), std::string state_dir = {});

  VmStatus status();
  bool suspend(const Progress& progress, std::string* why);
  // `to`: the host GPUs the VM's guest devices are from now on (empty: where they were).
  bool resume(const Progress& progress, std::string* why, const std::vector<int>& to = {});
  // Suspend into `dir` (created; must not hold a saved VM already).
  bool save(const std::string& dir, const Progress& progress, std::string* why);
  // Resume the suspended clients from the state files in `dir` (kept for a retry). With no
  // client suspended here (a new stub, a VM that is being restored), `dir` is remembered for
  // the VM image that names it: its clients come back when QEMU loads that image.
  bool restore(const std::string& dir, const Progress& progress, std::string* why, const std::vector<int>& to = {});
  // HostEndpointOptions::on_region_restored: each listed slot's client from the saved VM
  // its image token names, or lost.
  void adopt_restored(const vmrpc::RestoredRegion& r);

  // Saved state only for handing clients to the next stub process ("upgrade-*" by vmcudactl
  // upgrade, "restart-*" by a restart under the service manager): once every client in it
  // is back it is removed; at start, those no live connection's image token names (the
  // stub was stopped, not restarted; the VM went meanwhile) are removed.
  static bool is_handover_dir(const std::string& name) {
    return name.starts_with("upgrade-") || name.starts_with("restart-");
  }
  void remove_stale_handovers();

  const std::string& vm() const { return vm_; }
  std::vector<std::string> gpus() const;
  const std::string& state_dir() const { return state_dir_; }

 private:
  std::shared_ptr<class VmLedger> ledger_;
  using SlotKey = std::pair<uint64_t, uint32_t>;
  // A suspend a program refuses only for now (client_control::Reply::retry: a stream capture
  // open...) is tried again, the VM running meanwhile, until the quiesce timeout.
  bool suspend_waiting(const std::string* dir, const Progress& progress, std::string* why);
  bool suspend_into(const std::string* dir, const Progress& progress, std::string* why, bool* retry);
  std::string saved_dir_of(uint64_t token);  // "" when unknown
  void index_saved(uint64_t token, const std::string& dir);
  void renew_tokens();
  void set_token_parked(uint64_t connection, const std::set<SlotKey>& parked);
  void forget_gone_clients();
  bool ended(const SlotKey& k, int worker_pid);
  bool resume_from(const std::string* dir, const Progress& progress, std::string* why, const std::vector<int>& to);
  bool request(const SlotKey& k, client_control::Op op, const std::string& path, client_control::Reply* reply,
               const Progress& progress, uint64_t done_before, uint64_t total, std::string* why,
               const std::vector<int>& devices = {});
  bool check_move(const std::vector<int>& to, std::string* why) const;
  class Placement* placement_ = nullptr;
  void release_all_held();
  // The second pass of a resume (client_control kIpcAttach): each of `keys` maps and opens
  // again what it had opened of other programs' memory and events, once every exporter of
  // the VM is back. One that cannot is suspended again (in host memory) and goes to
  // `failed`; returns the first error ("" when none).
  std::string attach_ipc(const std::vector<SlotKey>& keys, std::vector<SlotKey>* failed);

  vmrpc::HostEndpoint& endpoint_;
  std::string vm_;
  std::vector<std::string> gpus_;
  std::chrono::milliseconds quiesce_timeout_;
  std::mutex mu_;             // one operation at a time
  std::string state_ = "running";
  std::mutex state_mu_;       // state_ for status() while an operation runs
  std::set<SlotKey> held_;    // clients held (suspended, or being suspended)
  // Suspended clients and where their state is: "" in host memory (their service has it),
  // else the state file to restore from.
  std::map<SlotKey, std::string> suspended_;
  // Clients of a restored region back but for what they opened of another connection's IPC
  // memory or events (its exporter not back yet: Session::ipc_attach): suspended again in
  // host memory, tried again after each region restored later (an upgrade or restart brings
  // every connection back at once, in no order the programs chose).
  std::set<SlotKey> awaiting_exporter_;
  void retry_awaiting_exporter(uint64_t restored_connection);
  std::map<SlotKey, std::string> awaiting_dir_;  // the hand-over each came from
  // `clients` more of the hand-over saved in `dir` are back; all of them: its files go.
  void handed_back(const std::string& dir, size_t clients);
  std::string state_dir_;
  std::map<uint64_t, std::string> pending_;  // image token -> saved VM dir (vmcudactl restore)
  std::map<std::string, size_t> upgrade_restored_;  // upgrade dir -> its clients back so far
  bool vm_suspended_ = false;  // also with no client at all
  std::set<uint64_t> suspended_connections_;  // the VM's connections when it was suspended
  bool suspended_to_dir_ = false;             // by a save
  PolicyInfo policy_info_;
  void set_state(const std::string& s) {
    std::lock_guard l(state_mu_);
    state_ = s;
  }
};

}  // namespace vmcuda::host
