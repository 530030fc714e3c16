#include "vm_control.h"

#include "placement.h"
#include "state_stream.h"
#include "vm_ledger.h"

#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <regex>
#include <thread>

#include <algorithm>
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
std::string hex(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}
// A saved VM's manifest, read as untrusted input: its connections' image tokens and, per
// (old connection, slot), the client's state file (a plain name inside the directory).
struct Manifest {
  std::map<uint64_t, uint64_t> connection_of_token;
  std::map<std::pair<uint64_t, uint32_t>, std::string> files;
};
bool read_manifest(const std::string& dir, Manifest* m, std::string* why) {
  try {
    std::ifstream in(fs::path(dir) / "manifest.json");
    if (!in) {
      *why = dir + " holds no saved VM (no readable manifest.json)";
      return false;
    }
    const auto j = nlohmann::json::parse(in);
    if (j.value("format", "") != "vmcuda-saved-vm") {
      *why = dir + "/manifest.json is not a vmcuda saved VM";
      return false;
    }
    static const std::regex file_name("client-[0-9]{1,20}-[0-9]{1,10}\\.state");
    for (const auto& c : j.value("connections", nlohmann::json::array()))
      m->connection_of_token[c.at("token").get<uint64_t>()] = c.at("connection").get<uint64_t>();
    for (const auto& c : j.at("clients")) {
      const std::string f = c.at("file").get<std::string>();
      if (!std::regex_match(f, file_name)) {
        *why = dir + "/manifest.json names a state file '" + f + "' that vmcuda does not write";
        return false;
      }
      m->files[{c.at("connection").get<uint64_t>(), c.at("slot").get<uint32_t>()}] = f;
    }
    return true;
  } catch (const std::exception& e) {
    *why = dir + "/manifest.json is damaged: " + e.what();
    return false;
  }
}
}  // namespace

VmControl::VmControl(vmrpc::HostEndpoint& endpoint, std::string vm, std::vector<std::string> gpus,
                     std::chrono::milliseconds quiesce_timeout, std::string state_dir)
    : endpoint_(endpoint),
      vm_(std::move(vm)),
      gpus_(std::move(gpus)),
      quiesce_timeout_(quiesce_timeout),
      state_dir_(std::move(state_dir)) {}

// The index of saved VMs: <state dir>/saved/<token> -> the saved VM's directory.
void VmControl::index_saved(uint64_t token, const std::string& dir) {
  if (state_dir_.empty()) return;
  std::error_code ec;
  const fs::path saved = fs::path(state_dir_) / "saved";
  fs::create_directories(saved, ec);
  ::chmod(state_dir_.c_str(), 0700);
  ::chmod(saved.c_str(), 0700);
  const fs::path link = saved / hex(token);
  fs::remove(link, ec);
  fs::create_directory_symlink(fs::absolute(dir, ec), link, ec);
  if (ec)
    VMRPC_LOG(kWarn, "stub", vm_ + ": cannot index the saved VM " + dir + " in " + saved.string() + ": " +
                                 ec.message() + " (restoring this VM image will need `vmcudactl restore " + dir + "`)");
}

std::string VmControl::saved_dir_of(uint64_t token) {
  if (auto it = pending_.find(token); it != pending_.end()) return it->second;
  if (state_dir_.empty()) return {};
  std::error_code ec;
  const fs::path target = fs::read_symlink(fs::path(state_dir_) / "saved" / hex(token), ec);
  return ec ? std::string() : target.string();
}

// Whether a client being suspended ended by itself (its slot served no more, or by another
// worker): given a moment, as the endpoint notices a worker's exit asynchronously.
bool VmControl::ended(const SlotKey& k, int worker_pid) {
  for (int i = 0; i < 50; ++i) {
    const auto now = endpoint_.served_slots();
    if (std::none_of(now.begin(), now.end(), [&](const vmrpc::ServedSlot& x) {
          return x.connection_id == k.first && x.slot == k.second && x.worker_pid == worker_pid;
        }))
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

void VmControl::forget_gone_clients() {
  const auto ids = endpoint_.connection_ids();
  const std::set<uint64_t> live(ids.begin(), ids.end());
  bool forgot = false;
  for (auto it = suspended_.begin(); it != suspended_.end();) {
    if (live.contains(it->first.first)) {
      ++it;
      continue;
    }
    held_.erase(it->first);
    it = suspended_.erase(it);
    forgot = true;
  }
  // A save's VM gone (virsh save stops it): nothing is left to resume. Clients suspended in
  // host memory wait for `vmcudactl resume` whatever happens.
  const bool vm_gone = suspended_to_dir_ && !suspended_connections_.empty() &&
                       std::none_of(suspended_connections_.begin(), suspended_connections_.end(),
                                    [&](uint64_t c) { return live.contains(c); });
  if (vm_suspended_ && suspended_to_dir_ && suspended_.empty() && (forgot || vm_gone)) {
    suspended_connections_.clear();
    // Saved, then the VM went away (virsh save stops it): nothing is left to resume here.
    vm_suspended_ = false;
    endpoint_.set_hold_new_slots(false);
    set_state("running");
  }
}

// A new image token for the connection's region while none of its services is in a batch:
// they compare it before each batch and take a change under them for a replaced region.
// Clients that started after the restore run meanwhile: parked for the moment (`parked`
// are held already).
void VmControl::set_token_parked(uint64_t connection, const std::set<SlotKey>& parked) {
  std::vector<SlotKey> held_here;
  for (const auto& s : endpoint_.served_slots()) {
    const SlotKey k{s.connection_id, s.slot};
    if (s.connection_id != connection || parked.contains(k) || held_.contains(k)) continue;
    std::string why;
    if (endpoint_.hold_slot(k.first, k.second, quiesce_timeout_, &why)) held_here.push_back(k);
    else VMRPC_LOG(kWarn, "stub", vm_ + ": " + name_of(k.first, k.second) + ": " + why);
  }
  endpoint_.set_image_token(connection, vmrpc::new_image_token());
  for (const auto& k : held_here) endpoint_.release_slot(k.first, k.second);
}

void VmControl::renew_tokens() {
  // Running on: an image saved before must look different from the region now, so that
  // loading it again is noticed.
  for (uint64_t c : endpoint_.connection_ids()) endpoint_.set_image_token(c, vmrpc::new_image_token());
}

VmStatus VmControl::status() {
  if (std::unique_lock l(mu_, std::try_to_lock); l.owns_lock()) forget_gone_clients();  // not during an operation
  VmStatus s;
  s.vm = vm_;
  if (ledger_) {
    s.quota_bytes = ledger_->limit();
    s.charged_bytes = ledger_->used();
    s.host_quota_bytes = ledger_->limit(VmLedger::kHost);
    s.host_charged_bytes = ledger_->used(VmLedger::kHost);
  }
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
    s.module_bytes += c.reply.status.module_bytes;
    s.clients.push_back(std::move(c));
  }
  return s;
}

std::vector<std::string> VmControl::gpus() const { return placement_ ? placement_->names() : gpus_; }

bool VmControl::check_move(const std::vector<int>& to, std::string* why) const {
  if (to.empty()) return true;
  if (!placement_) {
    if (why) *why = "this stub cannot move its VM to other GPUs";
    return false;
  }
  return placement_->check_move(to, why);
}

bool VmControl::request(const SlotKey& k, cc::Op op, const std::string& path, cc::Reply* reply,
                        const Progress& progress, uint64_t done_before, uint64_t total, std::string* why,
                        const std::vector<int>& devices) {
  std::vector<std::byte> bytes;
  std::string err;
  const auto on_progress = [&](std::span<const std::byte> m) {
    cc::Progress p;
    if (progress && cc::decode(m, &p)) progress(p.phase, done_before + p.done, total);
  };
  if (!endpoint_.control_slot(k.first, k.second, cc::encode(cc::Request{op, path, devices}), &bytes, on_progress,
                              &err)) {
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

std::string VmControl::attach_ipc(const std::vector<SlotKey>& keys, std::vector<SlotKey>* failed) {
  std::string first;
  for (const auto& k : keys) {
    cc::Reply r;
    std::string err;
    if (request(k, cc::Op::kIpcAttach, {}, &r, {}, 0, 0, &err)) continue;
    if (first.empty()) first = err;
    if (failed) failed->push_back(k);
    cc::Reply again;
    std::string e2;
    if (!request(k, cc::Op::kSuspend, {}, &again, {}, 0, 0, &e2))
      VMRPC_LOG(kWarn, "stub", vm_ + ": " + err + "; suspending it again failed too: " + e2 +
                                    " (its program's next use of that memory or event fails)");
  }
  return first;
}

bool VmControl::suspend(const Progress& progress, std::string* why) {
  std::lock_guard l(mu_);
  return suspend_waiting(nullptr, progress, why);
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
  return suspend_waiting(&dir, progress, why);
}

bool VmControl::suspend_waiting(const std::string* dir, const Progress& progress, std::string* why) {
  const auto start = std::chrono::steady_clock::now();
  for (std::string last;;) {
    bool retry = false;
    std::string err;
    if (suspend_into(dir, progress, &err, &retry)) return true;
    const auto waited = std::chrono::steady_clock::now() - start;
    if (!retry || waited >= quiesce_timeout_) {
      if (why)
        *why = retry ? err + " (still so after " +
                           std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()) +
                           " ms of trying again)"
                     : err;
      return false;
    }
    if (err != last) {  // each new reason once, as the operation's progress and in the log
      VMRPC_LOG(kInfo, "stub", vm_ + ": suspend waits: " + err);
      if (progress) progress("waiting: " + err.substr(0, err.find(';')), 0, 0);
      last = err;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

bool VmControl::suspend_into(const std::string* dir, const Progress& progress, std::string* why, bool* retry) {
  forget_gone_clients();  // a VM saved before and gone since (virsh save) is not suspended any more
  if (vm_suspended_) {
    if (why) *why = "the VM is already suspended (vmcudactl resume " + vm_ + ")";
    return false;
  }
  set_state(dir ? "saving" : "suspending");
  // Clients that start meanwhile wait before their first call, until the resume.
  endpoint_.set_hold_new_slots(true);
  {
    const auto ids = endpoint_.connection_ids();
    suspended_connections_ = std::set<uint64_t>(ids.begin(), ids.end());
    suspended_to_dir_ = dir != nullptr;
  }
  // 1. Quiesce: every client at a call boundary (calls already accepted finish; a guest
  // that keeps calling waits in its slot).
  std::vector<vmrpc::ServedSlot> slots = endpoint_.served_slots();
  std::map<SlotKey, int> workers;
  uint64_t total = 0;
  for (size_t i = 0; i < slots.size(); ++i) {
    // One more look before the last: a client whose service started as the hold was being
    // set may have missed both the hold and the first look.
    if (i + 1 == slots.size())
      for (const auto& n : endpoint_.served_slots())
        if (!workers.contains({n.connection_id, n.slot}) &&
            std::none_of(slots.begin(), slots.end(), [&](const vmrpc::ServedSlot& x) {
              return x.connection_id == n.connection_id && x.slot == n.slot;
            }))
          slots.push_back(n);
    const vmrpc::ServedSlot s = slots[i];
    std::string err;
    workers[{s.connection_id, s.slot}] = s.worker_pid;
    if (!endpoint_.hold_slot(s.connection_id, s.slot, quiesce_timeout_, &err)) {
      // A client that ended meanwhile (its program exited) has nothing to suspend.
      if (ended({s.connection_id, s.slot}, s.worker_pid)) continue;
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
  // 2. A client in a window it closes by itself (a stream capture open...) refuses now; asked
  // before any state moves, so that trying again soon costs nothing.
  for (const SlotKey& k : held_) {
    cc::Reply r;
    std::string err;
    if (request(k, cc::Op::kSuspendWindow, {}, &r, {}, 0, 0, &err) || !r.retry) continue;
    *retry = true;
    release_all_held();
    endpoint_.set_hold_new_slots(false);
    set_state("running");
    if (why) *why = err + "; the VM runs on as before";
    return false;
  }
  // 3. Each client's state out, its GPU objects released; on a failure the ones already
  // suspended come back and the VM runs on.
  uint64_t done = 0;
  nlohmann::json clients = nlohmann::json::array();
  for (auto held = held_.begin(); held != held_.end();) {
    const SlotKey k = *held;
    cc::Reply r;
    std::string err;
    const std::string path = dir ? (fs::path(*dir) / client_file(k.first, k.second)).string() : std::string();
    if (!request(k, dir ? cc::Op::kSave : cc::Op::kSuspend, path, &r, progress, done, total, &err)) {
      *retry = r.retry;
      if (ended(k, workers[k])) {  // its program exited just now: nothing to keep
        if (!path.empty()) state::remove_state_file(path);
        held = held_.erase(held);
        continue;
      }
      for (const auto& [back, back_path] : suspended_) {
        cc::Reply ignored;
        std::string e2;
        if (!request(back, back_path.empty() ? cc::Op::kResume : cc::Op::kRestore, back_path, &ignored, {}, 0, 0,
                     &e2))
          VMRPC_LOG(kWarn, "stub", vm_ + ": undoing a failed suspend: " + e2);
      }
      // Memory and events shared between them made anew by those resumes: mapped and opened
      // again by every client (those that were not suspended mapped the memory as it was).
      if (!suspended_.empty()) {
        std::vector<SlotKey> all(held_.begin(), held_.end()), failed;
        if (const std::string e2 = attach_ipc(all, &failed); !e2.empty())
          VMRPC_LOG(kWarn, "stub", vm_ + ": undoing a failed suspend: " + e2);
      }
      suspended_.clear();
      release_all_held();
      endpoint_.set_hold_new_slots(false);
      set_state("running");
      if (why) *why = err + "; the VM runs on as before";
      return false;
    }
    ++held;
    done += r.state_bytes;
    suspended_[k] = path;
    clients.push_back({{"connection", k.first}, {"slot", k.second}, {"pid", r.status.owner_tag},
                       {"file", dir ? client_file(k.first, k.second) : ""}, {"state_bytes", r.state_bytes}});
  }
  if (dir) {
    // Each connection's region gets a token of its own now: the VM image QEMU saves next
    // carries it, and a stub that sees a region replaced by that image finds this directory.
    nlohmann::json connections = nlohmann::json::array();
    for (uint64_t c : endpoint_.connection_ids()) {
      const uint64_t token = vmrpc::new_image_token();
      if (!endpoint_.set_image_token(c, token)) continue;
      connections.push_back({{"connection", c}, {"token", token}});
      index_saved(token, *dir);
    }
    const nlohmann::json manifest = {{"format", "vmcuda-saved-vm"}, {"version", 1},           {"vm", vm_},
                                     {"gpus", gpus()},              {"connections", connections}, {"clients", clients}};
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

bool VmControl::resume(const Progress& progress, std::string* why, const std::vector<int>& to) {
  std::lock_guard l(mu_);
  return resume_from(nullptr, progress, why, to);
}

bool VmControl::restore(const std::string& dir, const Progress& progress, std::string* why,
                        const std::vector<int>& to) {
  std::lock_guard l(mu_);
  forget_gone_clients();
  if (!check_move(to, why)) return false;
  Manifest m;
  std::string err;
  if (!read_manifest(dir, &m, &err)) {
    if (why) *why = err;
    return false;
  }
  if (vm_suspended_) return resume_from(&dir, progress, why, to);
  if (!to.empty()) {  // the VM comes back (its image loaded) on these GPUs
    placement_->set(to);
    VMRPC_LOG(kInfo, "stub", vm_ + ": moved to GPU(s) " + device_list(to));
  }
  if (m.files.empty()) {
    if (progress) progress("done", 0, 0);
    return true;  // a VM saved without clients: nothing to bring back
  }
  // Nothing suspended here: the VM itself is being restored (virsh restore, QEMU
  // -incoming); its clients come back when its image replaces a region.
  if (m.connection_of_token.empty()) {
    if (why) *why = dir + " was saved without region image tokens: nothing here can match it to a VM image";
    return false;
  }
  for (const auto& [token, conn] : m.connection_of_token) pending_[token] = dir;
  VMRPC_LOG(kInfo, "stub", vm_ + ": " + dir + " is ready: its clients come back when the VM's saved image is loaded");
  if (progress) progress("waiting for the VM image", 0, 0);
  return true;
}

void VmControl::adopt_restored(const vmrpc::RestoredRegion& r) {
  std::lock_guard l(mu_);
  // A VM saved here and gone since no longer holds new clients (its image may be this one).
  forget_gone_clients();
  if (r.slots.empty()) {  // an image without CUDA programs: only a token of its own
    set_token_parked(r.connection_id, {});
    return;
  }
  const std::string dir = saved_dir_of(r.image_token);
  Manifest m;
  std::string err;
  if (dir.empty() && r.handed_over)
    err = "the stub process before this one ended without saving them (it crashed or was killed; region token " +
          hex(r.image_token) + ")";
  else if (dir.empty())
    err = "no saved GPU state names this VM image (token " + hex(r.image_token) +
          "): it was saved or snapshotted without `vmcudactl save`, or its saved directory was not given "
          "(`vmcudactl restore DIR` before the VM is restored)";
  else
    read_manifest(dir, &m, &err);
  const auto old = m.connection_of_token.find(r.image_token);
  if (err.empty() && old == m.connection_of_token.end()) err = dir + " does not name this VM image";
  if (!err.empty()) {
    VMRPC_LOG(kWarn, "stub", vm_ + (r.handed_over ? ": connection " + std::to_string(r.connection_id) +
                                                        " taken over; "
                                                  : ": the VM was restored; ") +
                                 std::to_string(r.slots.size()) + " client(s) in it lose their GPU state: " + err);
    for (uint32_t s : r.slots) endpoint_.lose_restored_slot(r.connection_id, s);
    set_token_parked(r.connection_id, {});
    return;
  }
  set_state("restoring");
  std::vector<SlotKey> restored;
  for (uint32_t s : r.slots) {
    const auto f = m.files.find({old->second, s});
    if (f == m.files.end()) {
      VMRPC_LOG(kWarn, "stub", vm_ + ": restored slot " + std::to_string(s) + " has no state in " + dir +
                                   " (the client started after the save): its calls fail");
      endpoint_.lose_restored_slot(r.connection_id, s);
      continue;
    }
    const SlotKey k{r.connection_id, s};
    const std::string path = (fs::path(dir) / f->second).string();
    std::string why;
    if (!endpoint_.adopt_restored_slot(r.connection_id, s, std::chrono::seconds(30), &why)) {
      VMRPC_LOG(kWarn, "stub", vm_ + ": " + name_of(k.first, k.second) + ": " + why);
      endpoint_.lose_restored_slot(r.connection_id, s);
      continue;
    }
    cc::Reply reply;
    if (!request(k, cc::Op::kRestore, path, &reply, {}, 0, 0, &why)) {
      // Held, with its state file kept: `vmcudactl resume` tries again.
      VMRPC_LOG(kWarn, "stub", vm_ + ": " + why + "; the client stays suspended (fix the cause, then vmcudactl resume " +
                                   vm_ + ")");
      held_.insert(k);
      suspended_[k] = path;
      vm_suspended_ = true;
      continue;
    }
    restored.push_back(k);
  }
  // Second pass: what they opened of each other's memory and events (Session::ipc_attach).
  {
    std::vector<SlotKey> failed;
    if (const std::string e = attach_ipc(restored, &failed); !e.empty())
      VMRPC_LOG(kWarn, "stub", vm_ + ": " + e + "; the client stays suspended (fix the cause, then vmcudactl resume " +
                                   vm_ + ")");
    for (const auto& k : failed) {
      restored.erase(std::find(restored.begin(), restored.end(), k));
      held_.insert(k);
      suspended_[k] = "";
      vm_suspended_ = true;
      awaiting_exporter_.insert(k);
    }
  }
  // A token of its own before any client runs again (services compare it before each
  // batch; it changes under them only when a saved image replaces the region).
  set_token_parked(r.connection_id, std::set<SlotKey>(restored.begin(), restored.end()));
  for (const auto& k : restored) endpoint_.release_slot(k.first, k.second);
  const size_t back = restored.size();
  retry_awaiting_exporter(r.connection_id);
  set_state(vm_suspended_ ? "suspended" : "running");
  VMRPC_LOG(kInfo, "stub", vm_ + ": the VM was restored from " + dir + ": " + std::to_string(back) + " of " +
                               std::to_string(r.slots.size()) + " client(s) back on the GPU");
  // What `vmcudactl upgrade` saved is only for this hand-over: once every client in it is
  // back, it goes (it is the tenant's data). One waiting for its exporter counts when it is
  // back (retry_awaiting_exporter); one that did not come back keeps the files.
  size_t awaiting_here = 0;
  for (const SlotKey& k : awaiting_exporter_)
    if (k.first == r.connection_id) awaiting_dir_[k] = dir, ++awaiting_here;
  if (back + awaiting_here == r.slots.size()) handed_back(dir, back);
}

void VmControl::handed_back(const std::string& dir, size_t clients) {
  const fs::path saved(dir);
  if (state_dir_.empty() || saved.parent_path() != fs::path(state_dir_) || !is_handover_dir(saved.filename().string()))
    return;
  size_t& total = upgrade_restored_[dir];
  total += clients;
  Manifest m;
  std::string err;
  if (!read_manifest(dir, &m, &err) || total < m.files.size()) return;
  std::error_code ec;
  for (const auto& [token, conn] : m.connection_of_token) fs::remove(fs::path(state_dir_) / "saved" / hex(token), ec);
  fs::remove_all(saved, ec);
  upgrade_restored_.erase(dir);
  VMRPC_LOG(kInfo, "stub", vm_ + ": every client handed over is back; removed " + dir);
}

void VmControl::retry_awaiting_exporter(uint64_t restored_connection) {
  std::vector<SlotKey> back;
  for (const SlotKey& k : std::set<SlotKey>(awaiting_exporter_)) {
    if (k.first == restored_connection) continue;  // it just tried: its exporter is another connection's
    const auto s = suspended_.find(k);
    if (s == suspended_.end() || !s->second.empty()) {  // resumed or suspended otherwise since
      awaiting_exporter_.erase(k);
      awaiting_dir_.erase(k);
      continue;
    }
    cc::Reply r;
    std::string why;
    if (!request(k, cc::Op::kResume, {}, &r, {}, 0, 0, &why)) continue;  // stays suspended, tried again later
    std::vector<SlotKey> failed;
    attach_ipc({k}, &failed);  // suspends it again if its exporter is still not back
    if (!failed.empty()) continue;
    awaiting_exporter_.erase(k);
    suspended_.erase(k);
    back.push_back(k);
  }
  for (const auto& k : back) {
    held_.erase(k);
    endpoint_.release_slot(k.first, k.second);
    VMRPC_LOG(kInfo, "stub", vm_ + ": " + name_of(k.first, k.second) +
                                 " is back on the GPU with what it opened of another program's memory");
    if (const auto d = awaiting_dir_.find(k); d != awaiting_dir_.end()) {
      const std::string dir = d->second;
      awaiting_dir_.erase(d);
      handed_back(dir, 1);
    }
  }
  if (!back.empty() && suspended_.empty()) vm_suspended_ = false;
}

void VmControl::remove_stale_handovers() {
  std::lock_guard l(mu_);
  if (state_dir_.empty()) return;
  std::set<uint64_t> live;
  for (uint64_t id : endpoint_.connection_ids()) live.insert(endpoint_.image_token(id));
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(state_dir_, ec)) {
    if (!e.is_directory(ec) || !is_handover_dir(e.path().filename().string())) continue;
    Manifest m;
    std::string why;
    read_manifest(e.path().string(), &m, &why);  // damaged: nothing names it, it goes too
    if (std::any_of(m.connection_of_token.begin(), m.connection_of_token.end(),
                    [&](const auto& t) { return live.contains(t.first); }))
      continue;
    for (const auto& [token, conn] : m.connection_of_token) fs::remove(fs::path(state_dir_) / "saved" / hex(token), ec);
    fs::remove_all(e.path(), ec);
    VMRPC_LOG(kInfo, "stub", vm_ + ": removed " + e.path().string() +
                                 ": saved for a stub process to come, but no connection of this VM needs it now");
  }
}

bool VmControl::resume_from(const std::string* dir, const Progress& progress, std::string* why,
                            const std::vector<int>& to) {
  if (!vm_suspended_) {
    if (why) *why = "the VM is not suspended";
    return false;
  }
  if (!check_move(to, why)) return false;
  // Each client comes back on the VM's GPUs as they are now (also one left suspended by a
  // resume that moved the others).
  const std::vector<int> target = to.empty() && placement_ ? placement_->devices() : to;
  set_state(dir ? "restoring" : "resuming");
  std::string first_error;
  uint64_t done = 0;
  std::map<SlotKey, int> live;  // -> its worker
  std::vector<SlotKey> resumed;
  for (const auto& s : endpoint_.served_slots()) live[{s.connection_id, s.slot}] = s.worker_pid;
  for (auto it = suspended_.begin(); it != suspended_.end();) {
    if (!live.contains(it->first)) {
      // Its guest went away while suspended (a VM's process, or a local app that ended):
      // nothing to bring back, its state goes with it.
      VMRPC_LOG(kInfo, "stub", vm_ + ": " + name_of(it->first.first, it->first.second) + " ended while suspended");
      held_.erase(it->first);
      it = suspended_.erase(it);
      continue;
    }
    cc::Reply r;
    std::string err;
    const std::string path =
        dir ? (fs::path(*dir) / client_file(it->first.first, it->first.second)).string() : it->second;
    if (!request(it->first, path.empty() ? cc::Op::kResume : cc::Op::kRestore, path, &r, progress, done, 0, &err,
                 target)) {
      if (ended(it->first, live[it->first])) {
        // Its program exited while suspended (a local program that needs no reply to end
        // does not wait for the resume): nothing to bring back.
        VMRPC_LOG(kInfo, "stub", vm_ + ": " + name_of(it->first.first, it->first.second) + " ended while suspended");
        held_.erase(it->first);
        it = suspended_.erase(it);
        continue;
      }
      if (first_error.empty()) first_error = err;
      ++it;
      continue;
    }
    done += r.status.device_bytes;
    resumed.push_back(it->first);
    it = suspended_.erase(it);
  }
  // Second pass: what the resumed clients opened of each other's memory and events, now
  // that every exporter is back under its tokens. One that cannot stays suspended.
  {
    std::vector<SlotKey> failed;
    if (const std::string e = attach_ipc(resumed, &failed); !e.empty() && first_error.empty()) first_error = e;
    for (const auto& k : failed) {
      resumed.erase(std::find(resumed.begin(), resumed.end(), k));
      suspended_[k] = "";  // its state in host memory now (a state file it came from is untouched)
    }
  }
  // Moved: the clients that came back run there, and so do the programs that start now
  // (those still suspended move when they resume with the same list).
  if (!to.empty() && (!resumed.empty() || suspended_.empty())) {
    placement_->set(to);
    VMRPC_LOG(kInfo, "stub", vm_ + ": moved to GPU(s) " + device_list(to));
  }
  // A new image token while every client is still held (services take a token that
  // changes under them for a replaced region). Not after a partial resume: the clients
  // already resumed run (so loading the saved image in place again goes unnoticed until the
  // next full resume: docs/snapshots.md).
  if (first_error.empty()) renew_tokens();
  for (const auto& k : resumed) {
    endpoint_.release_slot(k.first, k.second);
    held_.erase(k);
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
