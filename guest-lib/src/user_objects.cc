// CUDA user objects (cudaUserObjectCreate/Retain/Release, cudaGraphRetain/ReleaseUserObject):
// kept in this process alone, as their destructor is a function of this process and nothing
// of them reaches the device. References are counted here: the program's, each graph's and
// each executable graph's (graph.cc tells of clones, child graph nodes, instantiations,
// launches and destructions). When the count reaches zero the destructor runs on one shared
// internal thread of this library, as CUDA runs it on one of its own (it may not call CUDA);
// an executable graph's references are given back only once the work of its launches is
// done: a host function queued on each stream it was launched on counts them down.
// Nothing of this is on the host, so a suspend carries it as it is. The runtime's calls and
// the driver's (cuUserObject*, cuGraphRetain/ReleaseUserObject: driver_graph.cc) are the
// same objects and code; each API only reports the answer its own way.
#include <atomic>
#include <climits>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "graph.h"
#include "runtime_state.h"
#include "vmcuda/cudart_api.h"

namespace vmcuda::guest {
namespace {

struct UserObject {
  void* ptr = nullptr;
  cudaHostFn_t destroy = nullptr;
  uint64_t refs = 0;
};
using Refs = std::map<uint64_t, uint64_t>;  // user object -> references held

struct State {
  std::mutex mu;
  uint64_t next = 0x7500000000000000ull;  // handles: never a pointer of the program's
  std::map<uint64_t, UserObject> objects;
  std::map<uint64_t, Refs> graphs, execs;
  std::map<uint64_t, std::set<uint64_t>> launched_on;  // exec -> the streams it was launched on
  // The destructor thread's queue.
  std::deque<std::pair<cudaHostFn_t, void*>> due;
  std::condition_variable cv;
  bool started = false;
};
State& state() {
  static auto* s = new State;  // never destroyed: its thread runs until the process ends
  return *s;
}
std::atomic<bool> g_any{false};  // no user object yet: the hooks cost nothing

// Drops `count` references of `obj`; a destructor due is queued. Lock held.
void drop_locked(State& st, uint64_t obj, uint64_t count) {
  auto it = st.objects.find(obj);
  if (it == st.objects.end()) return;
  it->second.refs -= std::min(count, it->second.refs);
  if (it->second.refs) return;
  st.due.emplace_back(it->second.destroy, it->second.ptr);
  st.objects.erase(it);
  if (!st.started) {
    st.started = true;
    std::thread([&st] {
      std::unique_lock l(st.mu);
      for (;;) {
        st.cv.wait(l, [&] { return !st.due.empty(); });
        auto [fn, ptr] = st.due.front();
        st.due.pop_front();
        l.unlock();
        fn(ptr);
        l.lock();
      }
    }).detach();
  }
  st.cv.notify_all();
}
void drop_all_locked(State& st, const Refs& refs) {
  for (const auto& [obj, n] : refs) drop_locked(st, obj, n);
}

bool valid_count(unsigned count) { return count != 0 && count <= INT_MAX; }

// After the work queued before it on each stream: the last one gives back an executable
// graph's references.
struct Countdown {
  std::atomic<int> left;
  Refs refs;
};
void count_down(void* p) {
  auto* c = static_cast<Countdown*>(p);
  if (c->left.fetch_sub(1) != 1) return;
  State& st = state();
  {
    std::lock_guard l(st.mu);
    drop_all_locked(st, c->refs);
  }
  delete c;
}

}  // namespace

void user_objects_graph_copied(uint64_t from, uint64_t to) {
  if (!g_any.load(std::memory_order_acquire)) return;
  State& st = state();
  std::lock_guard l(st.mu);
  auto it = st.graphs.find(from);
  if (it == st.graphs.end()) return;
  const Refs refs = it->second;
  for (const auto& [obj, n] : refs) {
    auto o = st.objects.find(obj);
    if (o == st.objects.end()) continue;
    o->second.refs += n;
    st.graphs[to][obj] += n;
  }
}

void user_objects_graph_destroyed(uint64_t graph) {
  if (!g_any.load(std::memory_order_acquire)) return;
  State& st = state();
  std::lock_guard l(st.mu);
  auto it = st.graphs.find(graph);
  if (it == st.graphs.end()) return;
  const Refs refs = std::move(it->second);
  st.graphs.erase(it);
  drop_all_locked(st, refs);
}

void user_objects_instantiated(uint64_t graph, uint64_t exec) {
  if (!g_any.load(std::memory_order_acquire)) return;
  State& st = state();
  std::lock_guard l(st.mu);
  auto it = st.graphs.find(graph);
  if (it == st.graphs.end()) return;
  for (const auto& [obj, n] : it->second) {
    auto o = st.objects.find(obj);
    if (o == st.objects.end()) continue;
    o->second.refs += n;
    st.execs[exec][obj] += n;
  }
}

void user_objects_launched(uint64_t exec, uint64_t stream) {
  if (!g_any.load(std::memory_order_acquire)) return;
  State& st = state();
  std::lock_guard l(st.mu);
  if (st.execs.contains(exec)) st.launched_on[exec].insert(stream);
}

void user_objects_exec_destroyed(uint64_t exec) {
  if (!g_any.load(std::memory_order_acquire)) return;
  State& st = state();
  Refs refs;
  std::set<uint64_t> streams;
  {
    std::lock_guard l(st.mu);
    auto it = st.execs.find(exec);
    if (it == st.execs.end()) return;
    refs = std::move(it->second);
    st.execs.erase(it);
    if (auto s = st.launched_on.find(exec); s != st.launched_on.end()) {
      streams = std::move(s->second);
      st.launched_on.erase(s);
    }
    if (streams.empty()) return drop_all_locked(st, refs);
  }
  // After its launches' work: a host function on each stream it was launched on (a stream
  // destroyed since has nothing of it left to wait for: its count goes at once).
  auto* c = new Countdown{{static_cast<int>(streams.size())}, std::move(refs)};
  const cudaError_t last = peek_last_error();
  const bool used = runtime_used_on_this_thread();
  for (uint64_t s : streams)
    if (cudaLaunchHostFunc(reinterpret_cast<cudaStream_t>(s), count_down, c) != cudaSuccess) count_down(c);
  restore_runtime_thread_state(last, used);  // the program's last error stays its own
}

cudaError_t user_object_create(uint64_t* out, void* ptr, cudaHostFn_t destroy, unsigned initial_refs,
                               unsigned flags) {
  // The one flag CUDA takes, and must be given (cudaUserObjectNoDestructorSync).
  if (!out || !destroy || !valid_count(initial_refs) || flags != cudaUserObjectNoDestructorSync)
    return cudaErrorInvalidValue;
  State& st = state();
  std::lock_guard l(st.mu);
  const uint64_t h = ++st.next;
  st.objects[h] = UserObject{ptr, destroy, initial_refs};
  g_any.store(true, std::memory_order_release);
  *out = h;
  return cudaSuccess;
}

cudaError_t user_object_retain(uint64_t object, unsigned count) {
  if (!valid_count(count)) return cudaErrorInvalidValue;
  State& st = state();
  std::lock_guard l(st.mu);
  auto it = st.objects.find(object);
  if (it == st.objects.end()) return cudaErrorInvalidValue;
  it->second.refs += count;
  return cudaSuccess;
}

cudaError_t user_object_release(uint64_t object, unsigned count) {
  if (!valid_count(count)) return cudaErrorInvalidValue;
  State& st = state();
  std::lock_guard l(st.mu);
  auto it = st.objects.find(object);
  if (it == st.objects.end()) return cudaErrorInvalidValue;
  drop_locked(st, it->first, count);
  return cudaSuccess;
}

cudaError_t graph_retain_user_object(uint64_t graph, uint64_t object, unsigned count, unsigned flags) {
  if (!graph || !valid_count(count) || (flags & ~unsigned{cudaGraphUserObjectMove})) return cudaErrorInvalidValue;
  if (!graph_known(graph)) return cudaErrorInvalidValue;
  State& st = state();
  std::lock_guard l(st.mu);
  auto it = st.objects.find(object);
  if (it == st.objects.end()) return cudaErrorInvalidValue;
  // Moved: the caller's references become the graph's (the count stays).
  if (!(flags & cudaGraphUserObjectMove)) it->second.refs += count;
  st.graphs[graph][it->first] += count;
  return cudaSuccess;
}

cudaError_t graph_release_user_object(uint64_t graph, uint64_t object, unsigned count) {
  if (!graph || !valid_count(count)) return cudaErrorInvalidValue;
  State& st = state();
  std::lock_guard l(st.mu);
  auto g = st.graphs.find(graph);
  if (g == st.graphs.end()) return cudaErrorInvalidValue;
  auto held = g->second.find(object);
  if (held == g->second.end() || held->second < count) return cudaErrorInvalidValue;  // not the graph's to give
  if ((held->second -= count) == 0) g->second.erase(held);
  drop_locked(st, object, count);
  return cudaSuccess;
}

}  // namespace vmcuda::guest

using namespace vmcuda::guest;

namespace {
uint64_t handle(const void* p) { return reinterpret_cast<uint64_t>(p); }
}  // namespace

cudaError_t cudaUserObjectCreate(cudaUserObject_t* object_out, void* ptr, cudaHostFn_t destroy,
                                 unsigned int initialRefcount, unsigned int flags) {
  if (cudaError_t e = enter_device_call()) return e;
  uint64_t h = 0;
  if (cudaError_t e = user_object_create(object_out ? &h : nullptr, ptr, destroy, initialRefcount, flags))
    return record(e);
  *object_out = reinterpret_cast<cudaUserObject_t>(h);
  return cudaSuccess;
}

cudaError_t cudaUserObjectRetain(cudaUserObject_t object, unsigned int count) {
  if (cudaError_t e = enter_device_call()) return e;
  return record(user_object_retain(handle(object), count));
}

cudaError_t cudaUserObjectRelease(cudaUserObject_t object, unsigned int count) {
  if (cudaError_t e = enter_device_call()) return e;
  return record(user_object_release(handle(object), count));
}

cudaError_t cudaGraphRetainUserObject(cudaGraph_t graph, cudaUserObject_t object, unsigned int count,
                                      unsigned int flags) {
  if (cudaError_t e = enter_device_call()) return e;
  return record(graph_retain_user_object(handle(graph), handle(object), count, flags));
}

cudaError_t cudaGraphReleaseUserObject(cudaGraph_t graph, cudaUserObject_t object, unsigned int count) {
  if (cudaError_t e = enter_device_call()) return e;
  return record(graph_release_user_object(handle(graph), handle(object), count));
}
