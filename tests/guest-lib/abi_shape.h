// Compares two function types by what the x86-64 SysV ABI makes of them: how many
// parameters, and for the result and each parameter its class (integer, pointer, float,
// trivially copyable struct, ...), size and alignment; for pointers, the same of what they
// point at. Two signatures with the same shapes pass and return values the same way, which
// is what matters between vmcuda's declarations and NVIDIA's, whose types are distinct.
#pragma once

// The checks name deprecated calls too (NVIDIA's library still exports them).
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <cstddef>
#include <type_traits>

namespace vmcuda_test {

struct Shape {
  char kind;  // v void, i integer or enum, f floating, c trivially copyable class, C other class,
              // x incomplete class, ? anything else
  size_t size;
  size_t align;
  int pointer_depth;
  constexpr bool operator==(const Shape&) const = default;
};

template <typename T>
constexpr Shape shape(int depth = 0) {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_pointer_v<U>) {
    return shape<std::remove_pointer_t<U>>(depth + 1);
  } else if constexpr (std::is_void_v<U>) {
    return {'v', 0, 0, depth};
  } else if constexpr (std::is_enum_v<U> || std::is_integral_v<U>) {
    return {'i', sizeof(U), alignof(U), depth};
  } else if constexpr (std::is_floating_point_v<U>) {
    return {'f', sizeof(U), alignof(U), depth};
  } else if constexpr (std::is_class_v<U>) {
    if constexpr (requires { sizeof(U); })
      return {std::is_trivially_copyable_v<U> ? 'c' : 'C', sizeof(U), alignof(U), depth};
    else
      return {'x', 0, 0, depth};
  } else {
    return {'?', 0, 0, depth};
  }
}

template <typename F1, typename F2>
struct SameAbi : std::false_type {};

template <typename R1, typename... A1, typename R2, typename... A2>
struct SameAbi<R1(A1...), R2(A2...)> {
  static constexpr bool check() {
    if constexpr (sizeof...(A1) != sizeof...(A2))
      return false;
    else
      return shape<R1>() == shape<R2>() && ((shape<A1>() == shape<A2>()) && ... && true);
  }
  static constexpr bool value = check();
};
template <typename R1, typename... A1, typename R2, typename... A2>
struct SameAbi<R1(A1...) noexcept, R2(A2...)> : SameAbi<R1(A1...), R2(A2...)> {};
template <typename R1, typename... A1, typename R2, typename... A2>
struct SameAbi<R1(A1...), R2(A2...) noexcept> : SameAbi<R1(A1...), R2(A2...)> {};

}  // namespace vmcuda_test

/// static_assert that ::name (NVIDIA's declaration) and ours::name (vmcuda's, in the parity
/// namespace) have the same ABI.
#define VMCUDA_EXPECT_SAME_ABI(name)                                                                             \
  static_assert(::vmcuda_test::SameAbi<decltype(::name), decltype(VMCUDA_CUDART_PARITY_NAMESPACE::name)>::value, \
                #name ": vmcuda's signature differs from NVIDIA's");
