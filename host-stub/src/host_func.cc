// Host functions (calls.def 0x1510): cudaLaunchHostFunc and cudaStreamAddCallback. The
// function is the guest's, so it runs in the guest: the host puts a gate on the stream
// (cuLaunchHostFunc, or cuStreamAddCallback for a callback, which also runs after a stream
// error and gets the status). When the stream reaches the gate, the driver runs it on its
// own thread: it publishes "reached" in the guest's mailbox entry (wire.h HostFuncEntry)
// and holds the stream until the guest has run the function and published "done". Work
// queued after it on the stream so waits for the guest's function, as with CUDA.
//
// The guest is not trusted: a guest that never answers holds only its own streams (its own
// context); a gate stops waiting when the client releases its slot or its session closes,
// so that a guest that went away never keeps the stub from closing the session.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "session.h"
#include "vmrpc/log.h"
#include "vmrpc/ordering.h"
#include "vmrpc/wire.h"

namespace vmcuda::host {

using vmrpc::wire::ChannelStatus;
namespace ordering = vmrpc::ordering;

namespace {

// Marks a gate's entry "not launched": the host could not queue it, so the guest drops the
// function without running it (and frees the entry). Not a CUresult (those are >= 0).
constexpr int32_t kNotLaunched = -1;

void publish(api::HostFuncEntry* e, uint32_t generation, int32_t status, uint32_t order) {
  ordering::store_relaxed(e->status, status);
  ordering::store_relaxed(e->order, order);
  ordering::store_release(e->reached, generation);  // after status and order: the guest reads them on seeing it
}

// On the driver's callback thread (the caller's, on the test executor).
// Until the guest's `done` count reaches `target` (or the client goes: closing, the stub
// stopping, its slot released). The guest's function may take long; its answer usually
// comes within microseconds: spin briefly, then sleep in short steps (longer ones once it
// is clearly a long one).
void wait_for_guest(HostFuncGate* g, uint32_t target) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  for (uint32_t i = 0;; ++i) {
    const uint32_t done = ordering::load_acquire(g->entry->done);
    if (static_cast<int32_t>(done - target) >= 0) break;
    if (g->closing->load() || (g->endpoint_stop && g->endpoint_stop->load()) ||
        ordering::load_acquire(*g->slot_state) != static_cast<uint32_t>(vmrpc::wire::SlotState::kClaimed))
      break;
    if (i < 256) {
      ordering::cpu_relax();
      continue;
    }
    const auto waited = clock::now() - start;
    std::this_thread::sleep_for(waited < std::chrono::milliseconds(10) ? std::chrono::microseconds(20)
                                                                       : std::chrono::microseconds(200));
  }
}

void run_gate(HostFuncGate* g, CUresult status) {
  g->phase.store(1);
  publish(g->entry, g->generation, status, g->reached->fetch_add(1) + 1);
  wait_for_guest(g, g->generation);
  g->phase.store(2);
}

// A persistent gate (a graph's host node): each time the driver reaches it, one more run is
// asked of the guest (`reached` counts up) and the stream waits until the guest has done that
// many (`done`). Launches of one executable graph are serialized, so runs do not overlap
// there; two executable graphs of one graph share the gate, and each waits for its own count.
void run_persistent(HostFuncGate* g) {
  g->phase.store(1);
  const uint32_t seq = std::atomic_ref<uint32_t>(g->entry->reached).fetch_add(1, std::memory_order_acq_rel) + 1;
  wait_for_guest(g, seq);
  g->phase.store(0);  // never 2: it stays until the session closes
}

void host_func_gate(void* p) {
  auto* g = static_cast<HostFuncGate*>(p);
  if (g->persistent) run_persistent(g);
  else run_gate(g, CUDA_SUCCESS);
}
void callback_gate(CUstream, CUresult status, void* p) { run_gate(static_cast<HostFuncGate*>(p), status); }

}  // namespace

CUhostFn host_func_gate_fn() { return host_func_gate; }

int32_t Session::on_LaunchHostFunc(const api::LaunchHostFuncArgs& a, api::Empty&, Request& req) {
  auto mailbox = req.ctx.heap(a.mailbox);
  if (!mailbox) return guest_fault("LaunchHostFunc: a heap range that is not in the shared heap", ChannelStatus::kBadHeapRef);
  constexpr size_t kEntry = sizeof(api::HostFuncEntry);
  // Whole, aligned entries (the gate uses atomics on them).
  if (a.flags & ~(api::kHostFuncCallback | api::kHostFuncPersistent) || reinterpret_cast<uintptr_t>(mailbox->data()) % kEntry != 0 ||
      mailbox->size() % kEntry != 0 || a.index >= mailbox->size() / kEntry)
    return guest_fault("LaunchHostFunc: unknown flags, or a mailbox entry out of range or misaligned");
  auto* entry = reinterpret_cast<api::HostFuncEntry*>(mailbox->data()) + a.index;
  if (a.flags & api::kHostFuncPersistent) {
    // Into a stream capture (graph.cc): a host node of the captured graph, run at each launch.
    if (a.flags & api::kHostFuncCallback) return guest_fault("LaunchHostFunc: a persistent callback");
    CUstream s;
    int device;
    if (CUresult e = resolve_stream(a.stream, &s, &device); e != CUDA_SUCCESS) return e;
    HostFuncGate* g = persistent_gate(entry, req);
    if (!g) return CUDA_ERROR_OUT_OF_MEMORY;
    // Outside a capture the driver would run it once, now; it stays a persistent gate.
    return on_device(device, [&] { return api_.cuLaunchHostFunc(s, host_func_gate, g); });
  }
  // From here on the guest waits on this entry: a failure must tell it, through the entry.
  auto fail = [&](int32_t e) {
    publish(entry, a.generation, kNotLaunched, 0);
    return e;
  };
  CUstream s;
  int device;
  if (CUresult e = resolve_stream(a.stream, &s, &device); e != CUDA_SUCCESS) return fail(e);
  // A one-shot gate in a graph would pass without the guest at its second launch: the guest
  // sends host functions on capturing streams as persistent ones (guest-lib host_func.cc).
  if (CUresult e = refuse_in_capture(s, device, "a host function not marked for a graph"); e != CUDA_SUCCESS)
    return fail(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  if (gates_.size() >= reap_gates_at_) {
    free_gates(false);
    reap_gates_at_ = std::max<size_t>(64, 2 * gates_.size());
  }
  if (gates_.size() >= limits_.max_host_funcs) {
    VMRPC_LOG(kWarn, "stub", log_tag_ + ": refused a host function: the client has " +
                                 std::to_string(gates_.size()) + " waiting (the limit)");
    return fail(CUDA_ERROR_OUT_OF_MEMORY);
  }
  auto gate = std::make_unique<HostFuncGate>();
  gate->entry = entry;
  gate->slot_state = &req.ctx.region.control(req.ctx.slot.slot).state;
  gate->closing = &closing_;
  gate->endpoint_stop = req.ctx.stop;
  gate->reached = &gates_reached_;
  gate->generation = a.generation;
  HostFuncGate* g = gate.get();
  gates_.push_back(std::move(gate));  // before the driver may run it
  const CUresult e = on_device(device, [&] {
    return a.flags & api::kHostFuncCallback ? api_.cuStreamAddCallback(s, callback_gate, g, 0)
                                            : api_.cuLaunchHostFunc(s, host_func_gate, g);
  });
  if (e != CUDA_SUCCESS) {
    gates_.pop_back();  // not queued: the driver never calls it
    return fail(e);
  }
  return CUDA_SUCCESS;
}

HostFuncGate* Session::persistent_gate(api::HostFuncEntry* entry, const Request& req) {
  return persistent_gate_at(entry, &req.ctx.region.control(req.ctx.slot.slot).state, req.ctx.stop);
}

// Also a resume's (graph_state.cc), which has the slot but no call.
HostFuncGate* Session::persistent_gate_at(api::HostFuncEntry* entry, uint32_t* slot_state, const std::atomic<bool>* stop) {
  // The entry's gate when it has one: it only counts the entry's reaches, whoever holds it.
  if (auto it = persistent_gates_.find(entry);
      it != persistent_gates_.end() && it->second->slot_state == slot_state && it->second->endpoint_stop == stop)
    return it->second;
  if (gates_.size() >= limits_.max_host_funcs) {
    VMRPC_LOG(kWarn, "stub", log_tag_ + ": refused a graph host node: the client has " +
                                 std::to_string(gates_.size()) + " host functions and nodes (the limit)");
    return nullptr;
  }
  auto gate = std::make_unique<HostFuncGate>();
  gate->entry = entry;
  gate->slot_state = slot_state;
  gate->closing = &closing_;
  gate->endpoint_stop = stop;
  gate->reached = &gates_reached_;
  gate->persistent = true;
  gates_.push_back(std::move(gate));
  persistent_gates_[entry] = gates_.back().get();
  return gates_.back().get();
}

void Session::free_gates(bool all) {
  if (!all) {
    std::erase_if(gates_, [](const auto& g) { return g->phase.load() == 2; });
    return;
  }
  // Closing: the contexts are gone, so no gate starts any more; one still running sees
  // closing_ and returns within a sleep step.
  for (const auto& g : gates_)
    while (g->phase.load() == 1) std::this_thread::sleep_for(std::chrono::microseconds(50));
  persistent_gates_.clear();
  gates_.clear();
}

}  // namespace vmcuda::host
