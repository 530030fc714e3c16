// NVIDIA's libraries whose calls name several kinds of object, on the host (cuSPARSE:
// cusparse.cc, cuSOLVER: cusolver.cc; issue 12 point 3): what every generated handler
// (scripts/gen-nvobj.py, build/generated/LIB/LIB_host.cc) does. The library is opened at its
// first call; each object (a handle, type 0, or a descriptor of the library's other types) is a
// VOL entry of the library's kind (NvobjObject) under its device's context, destroyed with the
// client; a call runs in its handle's context (else its first object's, else the current one)
// with the real library; device pointers must be the client's memory.
//
// Traits (one struct per library, in LIB.h): Api, kKind, the statuses kBadHandle (no such
// handle), kInvalidValue, kNoLibrary, kNotSupported, kAllocFailed, kLibrary (its soname),
// kNames (each object type in words), static const Api* library(const DriverApi&),
// reset_stream(const Api&, void* handle), kHostLibrary (whose host memory its first handle charges), and
// generated: step_info (what a recorded step names) and replay (a step run again at a resume).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "aligned_scalars.h"
#include "nvlib.h"
#include "session.h"
#include "vmcuda/api/nvobj_abi.h"

namespace vmcuda::host {


template <class Traits>
class NvobjScope {
 public:
  using Api = typename Traits::Api;

  NvobjScope(Session& s, const char* call) : s_(s), call_(call) {
    lib = Traits::library(s_.api_);
    if (!lib) status_ = Traits::kNoLibrary;
  }
  ~NvobjScope() {
    if (switched_ && s_.contexts_[s_.current_]) s_.make_current(s_.current_);
  }
  NvobjScope(const NvobjScope&) = delete;
  NvobjScope& operator=(const NvobjScope&) = delete;

  bool ok() const { return status_ == 0; }
  int32_t status() const { return status_; }
  template <class F>
  bool has(F f) {
    if (f) return true;
    status_ = log_missing(Traits::kLibrary, call_, Traits::kNotSupported, "its not-supported status");
    return false;
  }

  // The library's object behind guest handle `guest` of `type`; the first one (the handle, which
  // the generated code looks up first) chooses the context. A handle the client does not have,
  // or of another type: the library's answer to a bad one (not initialized for a handle).
  void* object(uint64_t guest, int type, const char* param) {
    Object* o = s_.vol_.find(Traits::kKind, guest);
    if (!o || o->as<NvobjObject>().type != type || !o->as<NvobjObject>().ptr) {
      if (guest) log_bad_object(param, type);
      status_ = type == 0 ? Traits::kBadHandle : Traits::kInvalidValue;
      return nullptr;
    }
    NvobjObject& d = o->as<NvobjObject>();
    if (!first_) {
      first_ = o;
      s_.make_current(o->device);
      switched_ = true;
      // A stream the app destroyed while the handle still names it: natively undefined; here
      // the handle falls back to the default stream rather than use a freed one.
      if (type == 0 && d.stream && !s_.vol_.find(ObjectKind::Stream, d.stream)) {
        Traits::reset_stream(*lib, d.ptr);
        d.stream = 0;
      }
    }
    return d.ptr;
  }
  // 0 (the library answers a NULL itself), or `count` elements of `elem` bytes of the client's
  // device memory.
  bool device(uint64_t ptr, uint64_t count, uint64_t elem) const {
    if (!ptr) return true;
    if (count && elem > UINT64_MAX / count) return false;
    return s_.owns_range(ptr, std::max<uint64_t>(1, count * elem));
  }
  int32_t bad_pointer(const char* param) {
    log_bad_pointer(s_.log_tag_, call_, param, "its invalid-value status");
    return status_ = Traits::kInvalidValue;
  }
  // A scalar (alpha, beta) of cudaDataType `type`: by the handle's pointer mode, the value the
  // guest sent or a device pointer of the client's (checked for the type's size).
  const void* scalar(const uint64_t (&value)[2], uint64_t ptr, int32_t type) {
    if (!first_ || !first_->as<NvobjObject>().pointer_mode) {
      const void* copy = scalars_.keep(value, sizeof value);
      if (!copy) status_ = Traits::kInvalidValue;
      return copy;
    }
    if (!device(ptr, 1, std::max<size_t>(1, api::data_type_bytes(type)))) {
      status_ = Traits::kInvalidValue;
      return nullptr;
    }
    return reinterpret_cast<const void*>(ptr);
  }
  // An int the library writes (a zero pivot's position, an nnz total): `host` (the reply carries
  // it) or, in the handle's device pointer mode, the client's device memory at `ptr`.
  int* mode_out(uint64_t ptr, int* host) {
    if (!first_ || !first_->as<NvobjObject>().pointer_mode) return host;
    if (!ptr || !device(ptr, 1, sizeof(int))) {
      status_ = Traits::kInvalidValue;
      return nullptr;
    }
    return reinterpret_cast<int*>(ptr);
  }
  // A host work area of `bytes` for this call (the library's scratch): at most 1 GiB.
  bool host_buffer(uint64_t bytes, std::vector<std::byte>& out) {
    if (bytes > (1ull << 30)) {
      status_ = Traits::kAllocFailed;
      return false;
    }
    out.resize(bytes);
    return true;
  }
  // The guest stream `guest` for the handle: of the handle's device (or the null/legacy stream).
  bool stream(uint64_t guest, void** out) {
    CUstream st = nullptr;
    int device = -1;
    if (s_.resolve_stream(guest, &st, &device) != CUDA_SUCCESS ||
        (guest >= api::kFirstGuestHandle && first_ && device != first_->device)) {
      status_ = Traits::kInvalidValue;
      return false;
    }
    *out = st;
    return true;
  }
  void set_stream(uint64_t guest) {
    if (first_) first_->as<NvobjObject>().stream = guest >= api::kFirstGuestHandle ? guest : 0;
  }
  void set_pointer_mode(int32_t mode) {
    if (first_) first_->as<NvobjObject>().pointer_mode = mode != 0;
  }
  // The library's host memory, charged with the worker's first handle.
  bool charge() {
    if (s_.charge_library_host(Traits::kHostLibrary)) return true;
    status_ = Traits::kAllocFailed;
    return false;
  }
  bool fresh(uint64_t guest) const { return guest >= api::kFirstGuestHandle && !s_.vol_.find(Traits::kKind, guest); }
  // The library made `made` (of `type`) for guest handle `guest`, in the current device's context.
  void adopt(uint64_t guest, int type, void* made) {
    NvobjObject d{};
    d.ptr = made;
    d.type = type;
    s_.vol_.add(Traits::kKind, s_.current_, guest, s_.vol_.context(s_.current_)->id, std::move(d));
  }
  // A call a resume replays (api/libs/LIB.calls: replay, replace), recorded on the object `on`
  // in the client's order; `replace`: it replaces the object's earlier step of the same call
  // (a setter). Beyond kNvobjMaxSteps the object cannot be carried (a suspend says so).
  template <class Args>
  void record(api::Call call, const Args& a, uint64_t on, bool replace) {
    static_assert(sizeof(Args) <= kNvobjMaxStepBytes && std::is_trivially_copyable_v<Args>);
    Object* o = s_.vol_.find(Traits::kKind, on);
    if (!o) return;
    NvobjObject& d = o->as<NvobjObject>();
    const auto number = static_cast<uint32_t>(call);
    if (replace) std::erase_if(d.steps, [&](const NvobjStep& x) { return x.call == number; });
    if (d.overflow) return;
    if (d.steps.size() >= kNvobjMaxSteps) {
      d.overflow = true;
      d.steps.clear();
      return;
    }
    NvobjStep step{.seq = s_.nvobj_seq_++, .call = number, .args = std::vector<std::byte>(sizeof a)};
    std::memcpy(step.args.data(), &a, sizeof a);
    d.steps.push_back(std::move(step));
  }
  // A factorization (`factor`) left a zero pivot in the object `on` that a replay would not make
  // again; reading it (`zeropivot`) lets a suspend go on (NvobjObject::pivot_unread).
  void set_pivot_unread(uint64_t on, bool unread) {
    if (Object* o = s_.vol_.find(Traits::kKind, on)) o->as<NvobjObject>().pivot_unread = unread;
  }
  // The object this call destroyed (the first one named): gone from the client.
  void remove() {
    if (!first_) return;
    first_->as<NvobjObject>().ptr = nullptr;
    s_.vol_.remove(first_->id);
    first_ = nullptr;
  }

  const Api* lib = nullptr;

 private:
  void log_bad_object(const char* param, int type) {
    static std::atomic<uint32_t> logged{0};
    if (logged.fetch_add(1, std::memory_order_relaxed) < 8)
      VMRPC_LOG(kWarn, "stub", s_.log_tag_ + ": " + call_ + ": " + param + " is not a " + Traits::kLibrary + " " +
                                   Traits::kNames[type] + " of the client's");
  }
  Session& s_;
  const char* call_;
  Object* first_ = nullptr;
  bool switched_ = false;
  int32_t status_ = 0;
  AlignedScalars scalars_;
};

}  // namespace vmcuda::host
