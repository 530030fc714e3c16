// host function area: cudaLaunchHostFunc and cudaStreamAddCallback (+ _ptsz). The function
// is this process's, so it runs here, in stream order: the host puts a gate on the stream
// (host-stub/src/host_func.cc) that, when the stream reaches it, marks the function's entry
// in our mailbox (wire.h HostFuncEntry, in the shared heap) "reached" and holds the stream
// until we mark it "done". A callback thread of ours (started on first use) watches the
// pending entries, runs each reached function and marks it done.
//
// The callback thread never takes the Remote lock: an app thread may hold it in
// cudaStreamSynchronize, waiting for this very function. Functions must not call CUDA (as
// CUDA says); one that does may deadlock here as it may natively.
//
// The launch is sent at once (a round trip, with what is queued): a host function must run
// when its stream reaches it even when the app makes no further CUDA call (e.g. it waits
// for a flag the function sets).
//
// Process exit: the callback thread is detached and its state never destroyed, so exit
// never waits for it. Once exit begins (an atexit handler, registered at the first launch)
// functions not yet started are dropped (marked done, so the host's gates pass) rather than
// run while the process's objects are being destroyed; one already running is waited for
// (at most a second).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "log.h"
#include "remote.h"
#include "runtime_state.h"
#include "graph.h"
#include "stream_event.h"
#include "vmcuda/cudart_api.h"
#include "vmrpc/ordering.h"

namespace vmcuda::guest {
namespace {

namespace ordering = vmrpc::ordering;
using api::HostFuncEntry;

constexpr uint32_t kEntriesPerMailbox = 256;  // one 4 KiB heap page; more pages when all are pending
// The host's HostFuncEntry::status for a gate it could not queue (host-stub/src/host_func.cc).
constexpr int32_t kNotLaunched = -1;

struct Mailbox {
  vmrpc::HeapBlock block;
  std::vector<uint32_t> generation;  // per entry: its latest use
  std::vector<uint32_t> free;        // entries not in use
  HostFuncEntry* entry(uint32_t i) const { return reinterpret_cast<HostFuncEntry*>(block.data) + i; }
};

struct Pending {
  uint32_t mailbox = 0, index = 0, generation = 0;
  HostFuncEntry* entry = nullptr;  // in the mailbox (stable: heap memory)
  vmrpc::wire::HeapRef mailbox_ref{};
  bool callback = false;
  cudaHostFn_t fn = nullptr;
  cudaStreamCallback_t cb = nullptr;
  cudaStream_t stream = nullptr;
  void* data = nullptr;
  // Once reached:
  int32_t status = 0;
  uint32_t order = 0;
};

// A graph's host node (cudaGraphAddHostNode, or a host function captured from a stream):
// its entry is never freed and runs its function each time the host's persistent gate
// reaches it: `reached` counts those, `done` the runs finished here (wire.h GraphHostNodeArgs).
struct Persistent {
  HostFuncEntry* entry = nullptr;
  cudaHostFn_t fn = nullptr;
  void* data = nullptr;
  uint32_t ran = 0;
};

struct State {
  std::mutex mu;
  std::vector<Persistent> persistent;  // shrinks by release_persistent_entry
  std::condition_variable cv;      // pending became non-empty; a function returned
  // Never given back: the host may write an entry until its session closes.
  std::vector<Mailbox> mailboxes;
  std::vector<Pending> pending;    // launched, not yet run
  bool thread_started = false;
  bool exiting = false;
  bool running = false;            // the callback thread is in a function now
  std::thread::id runner;
};
State& state() {
  static State* s = new State;  // never destroyed: entry points may run from atexit handlers
  return *s;
}

void release(State& st, const Pending& p) { st.mailboxes[p.mailbox].free.push_back(p.index); }

// How long the callback thread waits between looks at the mailbox while functions are
// pending: spin first (an answer within microseconds is common), then sleep in short steps.
void pause(uint32_t polls) {
  if (polls < 64) std::this_thread::yield();
  else std::this_thread::sleep_for(std::chrono::microseconds(polls < 1024 ? 20 : 50));
}

void callback_thread() {
  State& st = state();
  std::unique_lock l(st.mu);
  st.runner = std::this_thread::get_id();
  uint32_t polls = 0;
  std::vector<Pending> ready;
  for (;;) {
    // No polling while nothing is pending (graph host nodes are polled while any exists).
    st.cv.wait(l, [&] { return !st.pending.empty() || !st.persistent.empty(); });
    bool ran_persistent = false;
    for (size_t i = 0; i < st.persistent.size(); ++i) {
      const Persistent p = st.persistent[i];
      const uint32_t reached = ordering::load_acquire(p.entry->reached);
      if (static_cast<int32_t>(reached - p.ran) <= 0) continue;
      const bool run = !st.exiting;
      st.running = run;
      l.unlock();
      uint32_t ran = p.ran;
      for (; static_cast<int32_t>(reached - ran) > 0; ++ran) {
        if (run) p.fn(p.data);
        ordering::store_release(p.entry->done, ran + 1);
      }
      l.lock();
      st.running = false;
      st.persistent[i].ran = ran;
      ran_persistent = true;
      st.cv.notify_all();
    }
    if (ran_persistent) polls = 0;
    // After a sticky error the host's contexts are dead: a plain host function's gate is
    // never reached (CUDA does not call it), a callback's still is (with the error).
    const bool dead = sticky_error() != cudaSuccess;
    ready.clear();
    for (size_t i = 0; i < st.pending.size();) {
      Pending& p = st.pending[i];
      if (ordering::load_acquire(p.entry->reached) == p.generation) {
        p.status = ordering::load_relaxed(p.entry->status);
        p.order = ordering::load_relaxed(p.entry->order);
      } else if (st.exiting || (dead && !p.callback)) {
        p.status = kNotLaunched;  // dropped; marked done below in case a gate still comes
      } else {
        ++i;
        continue;
      }
      ready.push_back(p);
      st.pending.erase(st.pending.begin() + static_cast<ptrdiff_t>(i));
    }
    if (ready.empty()) {
      l.unlock();
      // Only graph host nodes to watch and none reached for a while: a longer nap.
      if (st.pending.empty() && polls > 4096) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      else pause(polls);
      ++polls;
      l.lock();
      continue;
    }
    polls = 0;
    // As the host reached them (order counts up, wrapping).
    std::sort(ready.begin(), ready.end(),
              [](const Pending& a, const Pending& b) { return static_cast<int32_t>(a.order - b.order) < 0; });
    for (const Pending& p : ready) {
      const bool run = p.status != kNotLaunched && !st.exiting;
      st.running = run;
      l.unlock();
      if (run) {
        if (p.callback) p.cb(p.stream, static_cast<cudaError_t>(p.status), p.data);
        else p.fn(p.data);
      }
      ordering::store_release(p.entry->done, p.generation);
      l.lock();
      st.running = false;
      release(st, p);
      st.cv.notify_all();
    }
  }
}

void at_exit() {
  State& st = state();
  std::unique_lock l(st.mu);
  st.exiting = true;
  // The host never waits for us again: pending gates pass when reached.
  for (const Pending& p : st.pending) ordering::store_release(p.entry->done, p.generation);
  // Graph host nodes: every later launch passes too (done far ahead of any count it reaches).
  for (const Persistent& p : st.persistent)
    ordering::store_release(p.entry->done, ordering::load_acquire(p.entry->reached) + 0x40000000u);
  st.cv.notify_all();
  // exit() called by a function itself must not wait for itself.
  if (std::this_thread::get_id() != st.runner)
    st.cv.wait_for(l, std::chrono::seconds(1), [&] { return !st.running; });
}

// The callback thread, started once (with the exit handler). st.mu held.
bool start_thread(State& st) {
  if (st.thread_started) return true;
  try {
    std::thread(callback_thread).detach();
  } catch (const std::exception& e) {
    VMCUDA_LOG(kWarn, "host_func", "cannot start the host function thread: %s", e.what());
    return false;
  }
  st.thread_started = true;
  std::atexit(at_exit);
  return true;
}

std::vector<Mailbox>::iterator free_mailbox(Remote& remote, State& st);

// A free entry (a new mailbox when every entry is in use), registered as pending. st.mu held.
cudaError_t add_pending(Remote& remote, State& st, Pending& p) {
  auto it = free_mailbox(remote, st);
  if (it == st.mailboxes.end()) return cudaErrorMemoryAllocation;
  p.mailbox = static_cast<uint32_t>(it - st.mailboxes.begin());
  p.index = it->free.back();
  it->free.pop_back();
  uint32_t& g = it->generation[p.index];
  if (++g == 0) ++g;  // 0 is what a fresh entry's `reached` says
  p.generation = g;
  p.entry = it->entry(p.index);
  p.mailbox_ref = it->block.ref();
  if (!start_thread(st)) {
    release(st, p);
    return cudaErrorMemoryAllocation;
  }
  st.pending.push_back(p);
  st.cv.notify_all();
  return cudaSuccess;
}

// A mailbox with a free entry (a new one when every entry is in use), or end(). st.mu held.
std::vector<Mailbox>::iterator free_mailbox(Remote& remote, State& st) {
  auto it = std::find_if(st.mailboxes.begin(), st.mailboxes.end(), [](const Mailbox& m) { return !m.free.empty(); });
  if (it == st.mailboxes.end()) {
    auto b = remote.slot().heap().allocate(kEntriesPerMailbox * sizeof(HostFuncEntry));
    if (!b) {
      VMCUDA_LOG(kWarn, "host_func", "a host function: the shared heap is full; give the VM a larger region");
      return st.mailboxes.end();
    }
    std::memset(b->data, 0, kEntriesPerMailbox * sizeof(HostFuncEntry));  // reached 0: generations start at 1
    Mailbox m{*b, std::vector<uint32_t>(kEntriesPerMailbox, 0), {}};
    for (uint32_t i = kEntriesPerMailbox; i-- > 0;) m.free.push_back(i);
    st.mailboxes.push_back(std::move(m));
    it = st.mailboxes.end() - 1;
  }
  return it;
}

cudaError_t launch(cudaStream_t stream, bool per_thread, Pending p) {
  if (cudaError_t e = enter_device_call()) return e;
  if (!p.fn && !p.cb) return record(cudaErrorInvalidValue);
  uint64_t wire;
  if (cudaError_t e = stream_wire_handle(stream, per_thread, &wire)) return record(e);
  cudaError_t err = cudaSuccess;
  Remote* remote = Remote::get(&err);
  if (!remote) return record(err);
  p.stream = stream;
  auto lock = remote->lock();
  // Into a stream capture: a host node of the captured graph, run at each of its launches.
  if (!p.callback && stream_capturing(*remote, wire)) {
    vmrpc::wire::HeapRef mailbox;
    uint32_t index;
    if (cudaError_t e = persistent_host_entry(*remote, p.fn, p.data, &mailbox, &index)) return record(e);
    const api::LaunchHostFuncArgs a{wire, mailbox, index, 0, api::kHostFuncPersistent, 0};
    return record(static_cast<cudaError_t>(remote->call<api::Call::LaunchHostFunc>(a).status));
  }
  State& st = state();
  {
    std::lock_guard l(st.mu);
    if (cudaError_t e = add_pending(*remote, st, p)) return record(e);
  }
  const api::LaunchHostFuncArgs a{wire, p.mailbox_ref, p.index, p.generation,
                                  p.callback ? api::kHostFuncCallback : 0u, 0};
  // The host reports a gate it could not queue in the entry (kNotLaunched), so that the
  // callback thread drops it; only when the link is gone does no answer come.
  const auto r = remote->call<api::Call::LaunchHostFunc>(a);
  if (r.status == cudaErrorDevicesUnavailable) {
    std::lock_guard l(st.mu);
    auto it = std::find_if(st.pending.begin(), st.pending.end(), [&](const Pending& q) {
      return q.mailbox == p.mailbox && q.index == p.index && q.generation == p.generation;
    });
    if (it != st.pending.end()) {
      st.pending.erase(it);
      release(st, p);
    }
  }
  return record(static_cast<cudaError_t>(r.status));
}

cudaError_t host_func(cudaStream_t stream, cudaHostFn_t fn, void* data, bool per_thread) {
  Pending p;
  p.fn = fn;
  p.data = data;
  return launch(stream, per_thread, p);
}

cudaError_t add_callback(cudaStream_t stream, cudaStreamCallback_t cb, void* data, unsigned flags, bool per_thread) {
  if (flags != 0) {  // reserved, must be 0
    if (cudaError_t e = enter_device_call()) return e;
    return record(cudaErrorInvalidValue);
  }
  Pending p;
  p.callback = true;
  p.cb = cb;
  p.data = data;
  return launch(stream, per_thread, p);
}

}  // namespace

cudaError_t persistent_host_entry(Remote& remote, cudaHostFn_t fn, void* data, vmrpc::wire::HeapRef* mailbox,
                                  uint32_t* index) {
  if (!fn) return cudaErrorInvalidValue;
  State& st = state();
  std::lock_guard l(st.mu);
  auto it = free_mailbox(remote, st);
  if (it == st.mailboxes.end()) return cudaErrorMemoryAllocation;
  if (!start_thread(st)) return cudaErrorMemoryAllocation;
  *index = it->free.back();
  it->free.pop_back();  // given back only by release_persistent_entry, once nothing can reach it
  *mailbox = it->block.ref();
  HostFuncEntry* e = it->entry(*index);
  // Counts from what the entry says now (a reused entry's last generation).
  const uint32_t start = ordering::load_acquire(e->reached);
  ordering::store_release(e->done, start);
  try {
    st.persistent.push_back(Persistent{e, fn, data, start});
  } catch (...) {
    return cudaErrorMemoryAllocation;
  }
  st.cv.notify_all();
  return cudaSuccess;
}

void release_persistent_entry(uint64_t entry_offset) {
  State& st = state();
  std::lock_guard l(st.mu);
  constexpr uint64_t kEntry = sizeof(HostFuncEntry);
  for (Mailbox& m : st.mailboxes) {
    if (entry_offset < m.block.offset || entry_offset >= m.block.offset + kEntriesPerMailbox * kEntry) continue;
    const auto index = static_cast<uint32_t>((entry_offset - m.block.offset) / kEntry);
    HostFuncEntry* e = m.entry(index);
    const auto it = std::find_if(st.persistent.begin(), st.persistent.end(), [&](const Persistent& p) { return p.entry == e; });
    if (it == st.persistent.end()) return;  // not a persistent entry (or released already)
    st.persistent.erase(it);
    // A later use counts on from what the entry says (its `reached` is no generation of it).
    m.generation[index] = ordering::load_acquire(e->reached);
    m.free.push_back(index);
    return;
  }
}

size_t persistent_entries_in_use() {
  State& st = state();
  std::lock_guard l(st.mu);
  return st.persistent.size();
}

bool persistent_host_function(Remote& remote, uint64_t entry_offset, cudaHostFn_t* fn, void** data) {
  const auto heap = remote.slot().region().heap();
  if (entry_offset >= heap.size()) return false;
  const std::byte* at = heap.data() + entry_offset;
  State& st = state();
  std::lock_guard l(st.mu);
  for (const Persistent& p : st.persistent)
    if (reinterpret_cast<const std::byte*>(p.entry) == at) return *fn = p.fn, *data = p.data, true;
  return false;
}

}  // namespace vmcuda::guest

using namespace vmcuda::guest;

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* userData) {
  return host_func(stream, fn, userData, false);
}
cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t stream, cudaHostFn_t fn, void* userData) {
  return host_func(stream, fn, userData, true);
}

cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback, void* userData,
                                  unsigned int flags) {
  return add_callback(stream, callback, userData, flags, false);
}
cudaError_t cudaStreamAddCallback_ptsz(cudaStream_t stream, cudaStreamCallback_t callback, void* userData,
                                       unsigned int flags) {
  return add_callback(stream, callback, userData, flags, true);
}
