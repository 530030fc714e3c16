// NVIDIA's handle-based libraries on the host (cuFFT: cufft.cc, cuRAND: curand.cc; issue 12
// point 3): what every handler of their calls does, generated (scripts/gen-nvlib.py,
// build/generated/LIB/LIB_host.cc) or hand-written. The library is opened at its first call
// (the stub starts without it); an object (plan, generator) is a VOL entry under its device's
// context, destroyed with the client; a call runs in that context with the real library; each
// device pointer must be the client's memory, each host array is bounded.
//
// Traits (one struct per library, in LIB.h): Api (the generated entry point table), Data (the
// VOL entry's data), Native (the library's handle type), kKind, the statuses kBadHandle (an
// object the guest does not have), kNoLibrary, kInvalidValue, kInvalidSize, kNotSupported,
// kLibrary (its soname), and static const Api* library(const DriverApi&, std::string* why),
// Native& native(Data&), void reset_stream(const Api&, Native), kAllocFailed and kHostLibrary (whose
// host memory its first object charges).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "session.h"
#include "vmrpc/log.h"

namespace vmcuda::host {

// Opens NVIDIA's `soname` for the guests' calls at its API (nullptr and `why` when it is not
// there, or is vmcuda's own guest library: `marker` is a symbol only that one exports).
void* open_nvidia_library(const DriverApi& driver, const char* soname, const char* marker, std::string* why);
// The first few calls of the process that named memory not the client's: logged.
void log_bad_pointer(const std::string& client, const char* call, const char* param, const char* answer);
// An entry point the host's library lacks: logged once per name. Returns `status`.
int32_t log_missing(const char* library, const char* call, int32_t status, const char* status_name);

// The library's entry points (Api, filled by `fill(lib, api)`) loaded once per DriverApi (the
// process has one; tests install fakes); nullptr and `why` (logged once, with what to install)
// without it.
template <class Api, class Fill>
const Api* load_nvidia_api(const DriverApi& driver, const char* soname, const char* marker, const char* install,
                           Fill fill, std::string* why) {
  struct Loaded {
    std::unique_ptr<Api> api;
    std::string why;
  };
  static std::mutex mu;
  static std::map<const DriverApi*, Loaded> loaded;
  std::lock_guard l(mu);
  auto [it, fresh] = loaded.try_emplace(&driver);
  if (fresh) {
    std::string w;
    if (void* lib = open_nvidia_library(driver, soname, marker, &w)) {
      auto api = std::make_unique<Api>();
      if (fill(lib, *api)) {
        it->second.api = std::move(api);
        VMRPC_LOG(kInfo, "stub", std::string("loaded ") + soname + " for the guests' calls");
      } else {
        w = "it lacks the library's create and destroy entry points";
      }
    }
    if (!it->second.api) {
      it->second.why = w;
      VMRPC_LOG(kWarn, "stub", std::string("cannot load ") + soname + " (" + w + "): guests' calls to it fail; "
                               "install " + install + " on this host where vmcuda-stub finds it (or set "
                               "VMCUDA_HOST_LIBDIR)");
    }
  }
  if (why) *why = it->second.why;
  return it->second.api.get();
}

template <class Traits>
class NvlibScope {
 public:
  using Api = typename Traits::Api;
  using Data = typename Traits::Data;
  using Native = typename Traits::Native;

  // A call on the client's object `guest`: in its device's context (the current device's
  // restored at the end).
  NvlibScope(Session& s, uint64_t guest, const char* call) : s_(s), call_(call) {
    obj_ = s.vol_.find(Traits::kKind, guest);
    if (!obj_) {
      status_ = Traits::kBadHandle;  // as the library answers a handle it did not make
      return;
    }
    if (!load()) return;
    s.make_current(obj_->device);
    switched_ = true;
    // A stream the app destroyed while the object still names it: the library would use a
    // freed stream. Natively undefined; here the object falls back to the default stream.
    Data& d = obj_->as<Data>();
    if (d.stream && !s.vol_.find(ObjectKind::Stream, d.stream)) {
      Traits::reset_stream(*lib, native());
      d.stream = 0;
    }
  }
  // A call that makes an object or names none: in the current device's context.
  NvlibScope(Session& s, const char* call) : s_(s), call_(call) { load(); }
  ~NvlibScope() {
    if (switched_ && s_.contexts_[s_.current_]) s_.make_current(s_.current_);
  }
  NvlibScope(const NvlibScope&) = delete;
  NvlibScope& operator=(const NvlibScope&) = delete;

  bool ok() const { return status_ == 0; }
  int32_t status() const { return status_; }
  // Whether the host's library has this entry point (else kNotSupported, logged once).
  template <class F>
  bool has(F f) {
    if (f) return true;
    status_ = log_missing(Traits::kLibrary, call_, Traits::kNotSupported, "its not-supported status");
    return false;
  }
  Object& object() { return *obj_; }
  Data& data() { return obj_->template as<Data>(); }
  Native native() { return Traits::native(data()); }

  // 0 (the library answers a NULL itself), or `count` elements of `elem` bytes (at least one
  // byte) of the client's device memory.
  bool device(uint64_t ptr, uint64_t count, uint64_t elem) const {
    if (!ptr) return true;
    if (count && elem > UINT64_MAX / count) return false;
    return s_.owns_range(ptr, std::max<uint64_t>(1, count * elem));
  }
  // A host array as the wire carries it (up to 3 values): `count` of them as the library's type.
  template <class T>
  static bool host_array(const int64_t (&v)[3], long long count, T (&out)[3]) {
    if (count < 1 || count > 3) return false;
    for (long long i = 0; i < count; ++i) {
      if (v[i] != static_cast<int64_t>(static_cast<T>(v[i]))) return false;  // an int array's value out of range
      out[i] = static_cast<T>(v[i]);
    }
    return true;
  }
  // A rank the arrays cannot have, or a value out of the array type's range: the library's
  // answer to a bad size.
  int32_t bad_array(const char*) { return status_ = Traits::kInvalidSize; }
  // The guest named memory that is not its own: refused (logged for the first few).
  int32_t bad_pointer(const char* param) {
    log_bad_pointer(s_.log_tag_, call_, param, "its invalid-value status");
    return status_ = Traits::kInvalidValue;
  }
  // A new object's guest handle: one the client does not have yet.
  // The library's host memory, charged with the worker's first object (Session::charge_library_host).
  bool charge() {
    if (s_.charge_library_host(Traits::kHostLibrary)) return true;
    status_ = Traits::kAllocFailed;
    return false;
  }
  bool fresh(uint64_t guest) const {
    return guest >= api::kFirstGuestHandle && !s_.vol_.find(Traits::kKind, guest);
  }
  // The library made `made` for guest handle `guest`, in the current device's context; it is
  // this scope's object from now on.
  void adopt(uint64_t guest, Native made) {
    Data d{};
    Traits::native(d) = made;
    obj_ = &s_.vol_.add(Traits::kKind, s_.current_, guest, s_.vol_.context(s_.current_)->id, std::move(d));
  }
  // A call a resume replays to make the object again (Traits::record keeps it).
  template <class Args>
  void record(api::Call call, const Args& a) {
    Traits::record(data(), static_cast<uint32_t>(call), std::as_bytes(std::span(&a, 1)));
  }

  const Api* lib = nullptr;

 private:
  bool load() {
    lib = Traits::library(s_.api_, nullptr);
    if (!lib) status_ = Traits::kNoLibrary;
    return lib != nullptr;
  }
  Session& s_;
  const char* call_;
  Object* obj_ = nullptr;
  bool switched_ = false;
  int32_t status_ = 0;
};

}  // namespace vmcuda::host
