#include "vm_control.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "vmrpc/log.h"

namespace vmcuda::host {

namespace cc = client_control;
namespace fs = std::filesystem;

namespace {
std::string client_file(uint64_t connection, uint32_t slot) {
  return "client-" + std::to_string(connection) + "-" + std::to_string(slot) + ".state";
}
std::string name_of(uint64_t connection, uint32_t slot) {
  return "client " + std::to_string(connection) + "/" + std::to_string(slot);
}
}  // namespace

VmControl::VmControl(vmrpc::HostEndpoint& endpoint, std::string vm, std::vector<std::string> gpus,
                     std::chrono::milliseconds quiesce_timeout)
    : endpoint_(endpoint), vm_(std::move(vm)), gpus_(std::move(gpus)), quiesce_timeout_(quiesce_timeout) {}

VmStatus VmControl::status() {
  VmStatus s;
  s.vm = vm_;
  {
    std::lock_guard l(state_mu_);
    s.state = state_;
  }
  for (const auto& slot : endpoint_.served_slots()) {
    std::vector<std::byte> bytes;
    VmClientStatus c;
    c.connection = slot.connection_id;
    c.worker_pid = slot.worker_pid;
    if (!endpoint_.snapshot_slot(slot.connection_id, slot.slot, &bytes, nullptr) || !cc::decode(bytes, &c.reply))
      continue;  // it ended meanwhile
    s.device_bytes += c.reply.status.device_bytes;
    s.clients.push_back(std::move(c));
  }
  return s;
}

bool VmControl::request(const SlotKey& k, cc::Op op, const std::string& path, cc::Reply* reply,
                        const Progress& progress, uint64_t done_before, uint64_t total, std::string* why) {
  std::vector<std::byte> bytes;
  std::string err;
  const auto on_progress = [&](std::span<const std::byte> m) {
    cc::Progress p;
    if (progress && cc::decode(m, &p)) progress(p.phase, done_before + p.done, total);
  };
  if (!endpoint_.control_slot(k.first, k.second, cc::encode(cc::Request{op, path}), &bytes, on_progress, &err)) {
    if (why) *why = name_of(k.first, k.second) + ": " + err;
    return false;
  }
  if (!cc::decode(bytes, reply)) {
    if (why) *why = name_of(k.first, k.second) + ": malformed answer";
    return false;
  }
  if (!reply->ok) {
    if (why) *why = name_of(k.first, k.second) + ": " + reply->error;
    return false;
  }
  return true;
}

void VmControl::release_all_held() {
  for (const auto& k : held_) endpoint_.release_slot(k.first, k.second);
  held_.clear();
}

bool VmControl::suspend(const Progress& progress, std::string* why) {
  std::lock_guard l(mu_);
  return suspend_into(nullptr, progress, why);
}

bool VmControl::save(const std::string& dir, const Progress& progress, std::string* why) {
  std::lock_guard l(mu_);
  std::error_code ec;
  if (fs::exists(fs::path(dir) / "manifest.json", ec)) {
    if (why) *why = dir + " already holds a saved VM; remove it or save to another directory";
    return false;
  }
  fs::create_directories(dir, ec);
  if (ec) {
    if (why) *why = "cannot create " + dir + ": " + ec.message();
    return false;
  }
  ::chmod(dir.c_str(), 0700);  // device memory contents: the tenant's data
  return suspend_into(&dir, progress, why);
}

bool VmControl::suspend_into(const std::string* dir, const Progress& progress, std::string* why) {
  if (vm_suspended_) {
    if (why) *why = "the VM is already suspended (vmcudactl resume " + vm_ + ")";
    return false;
  }
  set_state(dir ? "saving" : "suspending");
  // Clients that start meanwhile wait before their first call, until the resume.
  endpoint_.set_hold_new_slots(true);
  // 1. Quiesce: every client at a call boundary (calls already accepted finish; a guest
  // that keeps calling waits in its slot).
  const auto slots = endpoint_.served_slots();
  uint64_t total = 0;
  for (const auto& s : slots) {
    std::string err;
    if (!endpoint_.hold_slot(s.connection_id, s.slot, quiesce_timeout_, &err)) {
      release_all_held();
      endpoint_.set_hold_new_slots(false);
      set_state("running");
      if (why) *why = name_of(s.connection_id, s.slot) + " (pid " + std::to_string(s.owner_tag) + "): " + err +
                      "; nothing was suspended (a kernel that runs long? try again, or raise the timeout)";
      return false;
    }
    held_.insert({s.connection_id, s.slot});
    std::vector<std::byte> b;
    cc::Reply r;
    if (endpoint_.snapshot_slot(s.connection_id, s.slot, &b, nullptr) && cc::decode(b, &r))
      total += r.status.device_bytes;
  }
  // 2. Each client's state out, its GPU objects released; on a failure the ones already
  // suspended come back and the VM runs on.
  uint64_t done = 0;
  nlohmann::json clients = nlohmann::json::array();
  for (const auto& k : held_) {
    cc::Reply r;
    std::string err;
    const std::string path = dir ? (fs::path(*dir) / client_file(k.first, k.second)).string() : std::string();
    if (!request(k, dir ? cc::Op::kSave : cc::Op::kSuspend, path, &r, progress, done, total, &err)) {
      for (const auto& back : suspended_) {
        cc::Reply ignored;
        std::string e2;
        if (!request(back, dir ? cc::Op::kRestore : cc::Op::kResume,
                     dir ? (fs::path(*dir) / client_file(back.first, back.second)).string() : std::string(), &ignored,
                     {}, 0, 0, &e2))
          VMRPC_LOG(kWarn, "stub", vm_ + ": undoing a failed suspend: " + e2);
      }
      suspended_.clear();
      release_all_held();
      endpoint_.set_hold_new_slots(false);
      set_state("running");
      if (why) *why = err + "; the VM runs on as before";
      return false;
    }
    done += r.state_bytes;
    suspended_.insert(k);
    clients.push_back({{"connection", k.first}, {"slot", k.second}, {"pid", r.status.owner_tag},
                       {"file", dir ? client_file(k.first, k.second) : ""}, {"state_bytes", r.state_bytes}});
  }
  if (dir) {
    const nlohmann::json manifest = {{"format", "vmcuda-saved-vm"}, {"version", 1}, {"vm", vm_},
                                     {"gpus", gpus_},               {"clients", clients}};
    const fs::path tmp = fs::path(*dir) / "manifest.json.partial";
    std::ofstream(tmp) << manifest.dump(2) << "\n";
    std::error_code ec;
    fs::rename(tmp, fs::path(*dir) / "manifest.json", ec);
    if (ec) VMRPC_LOG(kWarn, "stub", vm_ + ": cannot write the manifest of " + *dir + ": " + ec.message());
  }
  if (progress) progress("done", total, total);
  vm_suspended_ = true;
  set_state(dir ? "saved" : "suspended");
  VMRPC_LOG(kInfo, "stub", vm_ + ": " + std::to_string(suspended_.size()) + " client(s) " +
                               (dir ? "saved to " + *dir : std::string("suspended")) + "; the GPU is free");
  return true;
}

bool VmControl::resume(const Progress& progress, std::string* why) {
  std::lock_guard l(mu_);
  return resume_from(nullptr, progress, why);
}

bool VmControl::restore(const std::string& dir, const Progress& progress, std::string* why) {
  std::lock_guard l(mu_);
  std::error_code ec;
  if (!fs::exists(fs::path(dir) / "manifest.json", ec)) {
    if (why) *why = dir + " holds no saved VM (no manifest.json)";
    return false;
  }
  return resume_from(&dir, progress, why);
}

bool VmControl::resume_from(const std::string* dir, const Progress& progress, std::string* why) {
  if (!vm_suspended_) {
    if (why) *why = "the VM is not suspended";
    return false;
  }
  set_state(dir ? "restoring" : "resuming");
  std::string first_error;
  uint64_t done = 0;
  std::set<SlotKey> live;
  for (const auto& s : endpoint_.served_slots()) live.insert({s.connection_id, s.slot});
  for (auto it = suspended_.begin(); it != suspended_.end();) {
    if (!live.contains(*it)) {
      // Its guest went away while suspended (a VM's process, or a local app that ended):
      // nothing to bring back, its state goes with it.
      VMRPC_LOG(kInfo, "stub", vm_ + ": " + name_of(it->first, it->second) + " ended while suspended");
      held_.erase(*it);
      it = suspended_.erase(it);
      continue;
    }
    cc::Reply r;
    std::string err;
    const std::string path = dir ? (fs::path(*dir) / client_file(it->first, it->second)).string() : std::string();
    if (!request(*it, dir ? cc::Op::kRestore : cc::Op::kResume, path, &r, progress, done, 0, &err)) {
      if (first_error.empty()) first_error = err;
      ++it;
      continue;
    }
    done += r.status.device_bytes;
    endpoint_.release_slot(it->first, it->second);
    held_.erase(*it);
    it = suspended_.erase(it);
  }
  if (!first_error.empty()) {
    set_state("suspended");
    if (why)
      *why = first_error + "; " + std::to_string(suspended_.size()) +
             " client(s) stay suspended with their state kept: fix the cause and resume again";
    return false;
  }
  release_all_held();  // clients that ended while suspended
  // And those that started while suspended (held before their first call).
  endpoint_.set_hold_new_slots(false);
  for (const auto& s : endpoint_.served_slots()) endpoint_.release_slot(s.connection_id, s.slot);
  vm_suspended_ = false;
  if (progress) progress("done", done, done);
  set_state("running");
  VMRPC_LOG(kInfo, "stub", vm_ + ": resumed");
  return true;
}

}  // namespace vmcuda::host
