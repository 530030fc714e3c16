// The input format of session_fuzz (vmcuda-stub's call handlers, host-stub Session), shared
// by the target and its seed writer (session_fuzz_seeds.cc). Little-endian; past the end
// of the input every field reads as zeros, and the call list ends there.
//
//   u8   flags        bit 0: the Session issues non-blocking work through its GPU working
//                     threads (StubLimits::gpu_threads, --isolation thread)
//   u8   heap_writes  then that many of:
//          u32 offset (modulo the heap's size), u16 len, len bytes (clipped at the heap's end)
//   then calls, up to kMaxCalls, each:
//   u8   call         index into kCalls (calls.def order) below kRawCall; kRawCall (255): a u32
//                     call id follows (the calls past index 254: cuBLAS's and cuBLASLt's; or an
//                     id that is no call, its arguments then `len` raw bytes)
//   u8   mode         bit 0: `len` is the whole argument size (a raw length, any value);
//                     else the arguments are the call's Args struct plus `len` tail bytes
//                     bit 1: patch: one u64 of the arguments is a value an earlier call
//                     returned (see below)
//   u16  len
//   [u8 which, u8 at] when patching: bytes [at, at + 8) of the arguments (at modulo the
//                     argument size - 7) become the which'th remembered value (modulo their count)
//   u16  reply_extra  reply capacity = sizeof(Reply) + reply_extra
//   the argument bytes (zeros past the input's end)
//
// Remembered values: the first u64 of every successful reply of 8 bytes or more (Malloc's
// pointer, ModuleLoad's module, ModuleGetFunction's function, ModuleGetGlobal's address,
// ...), oldest first, at most kMaxRemembered (later ones are dropped). So a sequence can use
// the pointers and handles the stub hands out without knowing their values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "vmcuda/api/calls.h"
#include "vmcuda/api/wire.h"

namespace vmcuda::fuzz {

inline constexpr uint8_t kFlagGpuThreads = 1u << 0;
// After the calls: suspend the session to host memory, damage the state stream where the
// rest of the input says ({u32 offset, u8 xor}...), and resume from it (host-stub/src/suspend.cc).
inline constexpr uint8_t kFlagSuspend = 1u << 1;
// Before the calls: another client of the same VM (a second Session on the VM's ledger)
// holds the next byte's count of MiB (modulo 40) of device memory, so the quota is shared:
// the VM's use never exceeds it, and both give everything back (vm_ledger.h).
inline constexpr uint8_t kFlagNeighbor = 1u << 2;
inline constexpr uint8_t kModeRawLength = 1u << 0;
inline constexpr uint8_t kModePatch = 1u << 1;
inline constexpr size_t kMaxCalls = 64;
inline constexpr size_t kMaxRemembered = 16;
inline constexpr uint32_t kMaxReplyExtra = 1u << 16;
inline constexpr uint8_t kRawCall = 255;

struct CallShape {
  uint32_t id;
  uint32_t arg_bytes;    // sizeof(Args), 0 for Empty
  uint32_t reply_bytes;  // sizeof(Reply), 0 for Empty
  const char* name;
};

template <class T>
constexpr uint32_t wire_size() {
  return std::is_empty_v<T> ? 0 : static_cast<uint32_t>(sizeof(T));
}

inline constexpr CallShape kCalls[] = {
#define VMCUDA_CALL(number, name, A, R, flags) \
  {number, wire_size<api::A>(), wire_size<api::R>(), #name},
#include "vmcuda/api/calls.def"
#undef VMCUDA_CALL
};
inline constexpr size_t kCallCount = sizeof kCalls / sizeof kCalls[0];

// The call `id` names (nullptr if none).
inline const CallShape* call_shape(uint32_t id) {
  for (const CallShape& s : kCalls)
    if (s.id == id) return &s;
  return nullptr;
}
// Index of `id` in kCalls, or kRawCall (past index 254, or no call: the id follows).
inline uint8_t call_index(api::Call c) {
  const CallShape* s = call_shape(static_cast<uint32_t>(c));
  return s && s - kCalls < kRawCall ? static_cast<uint8_t>(s - kCalls) : kRawCall;
}

// Writes inputs in this format (the seed writer; tests).
class InputWriter {
 public:
  explicit InputWriter(uint8_t flags = 0) { put<uint8_t>(flags), put<uint8_t>(0); }
  // Heap writes come first: add them all before the first call.
  void heap(uint32_t offset, const void* data, uint16_t len) {
    ++bytes_[1];
    put(offset), put(len);
    const auto* p = static_cast<const uint8_t*>(data);
    bytes_.insert(bytes_.end(), p, p + len);
  }
  // With kFlagNeighbor: the other client's MiB, after the heap writes, before the first call.
  void neighbor(uint8_t mib) { put(mib); }
  // One call with its Args struct (`args`, exactly sizeof(Args) bytes) and a tail.
  // patch_which >= 0: the arguments' u64 at `patch_at` is remembered value `patch_which`.
  template <class A>
  void call(api::Call c, const A& args, const void* tail = nullptr, uint16_t tail_len = 0, uint16_t reply_extra = 0,
            int patch_which = -1, uint8_t patch_at = 0) {
    put(call_index(c));
    if (call_index(c) == kRawCall) put(static_cast<uint32_t>(c));
    put<uint8_t>(patch_which >= 0 ? kModePatch : 0);
    put(tail_len);
    if (patch_which >= 0) put(static_cast<uint8_t>(patch_which)), put(patch_at);
    put(reply_extra);
    if constexpr (!std::is_empty_v<A>) {
      const auto* p = reinterpret_cast<const uint8_t*>(&args);
      bytes_.insert(bytes_.end(), p, p + sizeof args);
    }
    const auto* t = static_cast<const uint8_t*>(tail);
    if (tail_len) bytes_.insert(bytes_.end(), t, t + tail_len);
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  template <class T>
  void put(T v) {
    uint8_t b[sizeof v];
    std::memcpy(b, &v, sizeof v);
    bytes_.insert(bytes_.end(), b, b + sizeof v);
  }
  std::vector<uint8_t> bytes_;
};

}  // namespace vmcuda::fuzz
