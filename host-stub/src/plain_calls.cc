// The handlers of plain calls (plain_calls.def): each line there becomes Session::on_<Name>
// here, through forward_plain and the words of plain_call.h.
#include <tuple>
#include <utility>

#include "plain_call.h"
#include "session.h"

namespace vmcuda::host {

template <class A, class R, class... P, class... S>
int32_t Session::forward_plain(const char* malformed, CUresult (*DriverApi::*fn)(P...), const A& a, R& r,
                               S... words) {
  if constexpr (requires { a.pad; })
    if (!plain::all_zero(a.pad)) return guest_fault(malformed);
  std::tuple<plain::Slot<S, P>...> slots{plain::Slot<S, P>{words}...};
  int device = -1;  // the context's: the first handle's device
  // One word's field, checked and translated into its slot (out(): the driver fills it).
  auto field = [&](const auto& slot) -> const auto& { return a.*slot.spec.field; };
  auto resolve = [&](auto& slot) -> CUresult {
    constexpr plain::Kind kind = std::remove_reference_t<decltype(slot)>::Spec::kind;
    if constexpr (kind == plain::Kind::kIn) {
      slot.value = static_cast<decltype(slot.value)>(field(slot));
    } else if constexpr (kind == plain::Kind::kDevice) {
      if (!valid_device(field(slot))) return CUDA_ERROR_INVALID_DEVICE;
      return api_.cuDeviceGet(&slot.value, devices_[field(slot)]);
    } else if constexpr (kind == plain::Kind::kStream) {
      int d;
      if (CUresult e = resolve_stream(field(slot), &slot.value, &d); e != CUDA_SUCCESS) return e;
      if (device < 0) device = d;
    } else if constexpr (kind == plain::Kind::kEvent) {
      const Object* o = find_event(field(slot));
      if (!o) return CUDA_ERROR_INVALID_HANDLE;
      slot.value = o->as<EventObject>().event;
      if (device < 0) device = o->device;
    } else if constexpr (kind == plain::Kind::kFunction) {
      const Object* o = find_function(field(slot));
      if (!o) return CUDA_ERROR_INVALID_HANDLE;
      slot.value = o->as<FunctionObject>().fn;
      if (device < 0) device = o->device;
    }
    return CUDA_SUCCESS;
  };
  CUresult e = CUDA_SUCCESS;
  std::apply([&](auto&... s) { ((e == CUDA_SUCCESS ? e = resolve(s) : e), ...); }, slots);
  if (e != CUDA_SUCCESS) return e;
  auto call = [&] { return std::apply([&](auto&... s) { return (api_.*fn)(s.arg()...); }, slots); };
  const CUresult result = device >= 0 ? on_device(device, call) : call();
  std::apply(
      [&](auto&... s) {
        [[maybe_unused]] auto deliver = [&](auto& slot) {
          if constexpr (std::remove_reference_t<decltype(slot)>::kOut)
            r.*slot.spec.field = static_cast<std::remove_reference_t<decltype(r.*slot.spec.field)>>(slot.value);
        };
        (deliver(s), ...);
      },
      slots);
  return result;
}

// The handlers (plain_calls.def's words name fields of the line's Args, A, and Reply, R).
#define VMCUDA_PLAIN(name, fn, ...)                                                                        \
  int32_t Session::on_##name(const api::CallTraits<api::Call::name>::Args& a,                              \
                             api::CallTraits<api::Call::name>::Reply& r, Request&) {                       \
    using A [[maybe_unused]] = api::CallTraits<api::Call::name>::Args;                                     \
    using R [[maybe_unused]] = api::CallTraits<api::Call::name>::Reply;                                    \
    static_assert(plain::check<api::Call::name>(&DriverApi::fn __VA_OPT__(, ) __VA_ARGS__));               \
    return forward_plain(#name ": padding not zero", &DriverApi::fn, a, r __VA_OPT__(, ) __VA_ARGS__);    \
  }
#include "plain_calls.def"
#undef VMCUDA_PLAIN

}  // namespace vmcuda::host
