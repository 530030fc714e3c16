// The parameter words of plain_calls.def and their compile-time rules: how one field of a
// call's Args or Reply becomes one parameter of a driver function. Session::forward_plain
// (plain_calls.cc) runs them; check() says at compile time whether a table line fits its
// call's wire structs and its driver function (tests/host-stub/plain_calls_check.cc too).
#pragma once

#include <cstdint>
#include <type_traits>

#include "driver_api.h"
#include "vmcuda/api/calls.h"

namespace vmcuda::host::plain {

// What a word does with its field (plain_calls.def's header says it for the table's reader).
enum class Kind { kIn, kOut, kDevice, kStream, kEvent, kFunction };

// One word: a field of `S` (the call's Args; its Reply for kOut) of type `T`.
template <Kind K, class S, class T>
struct Spec {
  static constexpr Kind kind = K;
  using Struct = S;
  using Field = T;
  T S::*field;
};
template <Kind K, class S, class T>
constexpr Spec<K, S, T> spec(T S::*field) {
  return {field};
}

template <class T>
inline constexpr bool kNumber = std::is_arithmetic_v<T> || std::is_enum_v<T>;
// A value of type `From` fits in `To` without losing bits (a same-sized change of sign is the
// driver's to check, as the hand-written handlers' casts were).
template <class From, class To>
inline constexpr bool kFits = kNumber<From> && kNumber<To> && sizeof(From) <= sizeof(To) &&
                              std::is_floating_point_v<From> == std::is_floating_point_v<To>;

// Whether word `S` may stand for driver parameter `P` of call `C` (static_asserts name the rule
// broken; true when none is).
template <api::Call C, class S, class P>
consteval bool check_one() {
  using Args = typename api::CallTraits<C>::Args;
  using Reply = typename api::CallTraits<C>::Reply;
  using T = typename S::Field;
  if constexpr (S::kind == Kind::kOut) {
    static_assert(std::is_same_v<typename S::Struct, Reply>, "out(): a field of the call's Reply (calls.def)");
    static_assert(std::is_pointer_v<P> && !std::is_const_v<std::remove_pointer_t<P>>,
                  "out(): the driver's parameter is where it writes a value (T*)");
    static_assert(kFits<std::remove_pointer_t<P>, T>, "out(): the Reply field holds the driver's value whole");
  } else {
    static_assert(std::is_same_v<typename S::Struct, Args>, "in() and handles: a field of the call's Args (calls.def)");
    if constexpr (S::kind == Kind::kIn) {
      // A guest's value never becomes a host pointer or a driver handle.
      static_assert(!std::is_pointer_v<P>, "in(): only numbers: pointers and handles have their own words");
      static_assert(kFits<T, P>, "in(): the driver's parameter holds the Args field whole");
    } else if constexpr (S::kind == Kind::kDevice) {
      static_assert(std::is_same_v<P, CUdevice> && std::is_same_v<T, int32_t>, "device(): an int32 index to a CUdevice");
    } else if constexpr (S::kind == Kind::kStream) {
      static_assert(std::is_same_v<P, CUstream> && std::is_same_v<T, uint64_t>, "stream(): a u64 handle to a CUstream");
    } else if constexpr (S::kind == Kind::kEvent) {
      static_assert(std::is_same_v<P, CUevent> && std::is_same_v<T, uint64_t>, "event(): a u64 handle to a CUevent");
    } else {
      static_assert(std::is_same_v<P, CUfunction> && std::is_same_v<T, uint64_t>,
                    "function(): a u64 handle to a CUfunction");
    }
  }
  return true;
}

// A table line: call `C`, driver function `fn` (a DriverApi member), one word per parameter.
template <api::Call C, class... P, class... S>
consteval bool check(CUresult (*DriverApi::*)(P...), S...) {
  static_assert(sizeof...(P) == sizeof...(S), "plain_calls.def: one word per parameter of the driver function");
  if constexpr (sizeof...(P) == sizeof...(S)) return (check_one<C, S, P>() && ... && true);
  return false;
}

// Where a word's parameter lives between the checks and the driver call: the driver's value
// (an out() parameter's pointee: the driver writes it, forward_plain copies it to the Reply).
template <class S, class P>
struct Slot {
  using Spec = S;
  static constexpr bool kOut = S::kind == Kind::kOut;
  using Value = std::conditional_t<kOut, std::remove_pointer_t<P>, P>;
  S spec;
  Value value{};
  P arg() {
    if constexpr (kOut) return &value;
    else return value;
  }
};

// A wire struct's padding (a field named pad: a number or an array of them) is all zero.
template <class T>
constexpr bool all_zero(const T& pad) {
  if constexpr (std::is_array_v<T>) {
    for (const auto& x : pad)
      if (x != 0) return false;
    return true;
  } else {
    return pad == 0;
  }
}

}  // namespace vmcuda::host::plain
