// All memory ordering on the shared region lives here; every use says why.
//
// The region is plain memory shared with another address space (a process or a VM),
// so its fields are plain integers in wire.h and are accessed through std::atomic_ref.
#pragma once

#include <atomic>
#include <cstdint>

namespace vmrpc::ordering {

// Publish a value the other side polls (sequence numbers, states): everything written
// before it (frames, replies) must be visible before the other side sees the new value.
template <class T>
inline void store_release(T& field, T value) {
  std::atomic_ref<T>(field).store(value, std::memory_order_release);
}

// Read a value the other side publishes: what it wrote before publishing must be
// visible to the reads that follow.
template <class T>
inline T load_acquire(T& field) {
  return std::atomic_ref<T>(field).load(std::memory_order_acquire);
}

// A value nobody orders anything against (statistics, diagnostics).
template <class T>
inline T load_relaxed(T& field) {
  return std::atomic_ref<T>(field).load(std::memory_order_relaxed);
}
template <class T>
inline void store_relaxed(T& field, T value) {
  std::atomic_ref<T>(field).store(value, std::memory_order_relaxed);
}

template <class T>
inline bool compare_exchange(T& field, T& expected, T desired) {
  return std::atomic_ref<T>(field).compare_exchange_strong(expected, desired,
                                                            std::memory_order_acq_rel,
                                                            std::memory_order_acquire);
}

// Sleep/wake handshake (Dekker): the sleeper stores "I sleep" then re-checks the
// sequence; the waker stores the sequence then checks "sleeps". Without a full fence
// between each side's store and load both could read the old values and the wake-up
// would be lost. Pair: sleeper: store(sleeping=1); full_fence(); load(seq).
//                     waker:   store(seq);        full_fence(); load(sleeping).
inline void full_fence() { std::atomic_thread_fence(std::memory_order_seq_cst); }

// Spin-wait hint for the CPU (saves power, leaves the pipeline to the sibling thread).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace vmrpc::ordering
