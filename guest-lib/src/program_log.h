// The program's error log (CUDA 12.9's Error Log Management: cudaLogs* / cuLogs*, logs.cc):
// natively the driver's messages about failing calls; here the messages vmcuda has about this
// program's calls (why a call failed or is not supported in a VM: every warning guest-lib
// logs, each call that returns 801 for want of an implementation, the log calls' own
// argument errors). The host's driver's log is the stub's process's, shared by the VM's
// programs, so it is not this program's log.
//
// Kept as CUDA documents it: at most 25600 bytes of messages, the oldest dropped first; a
// message reads "[HH:MM:SS.mmm][TID][SOURCE][E|W][ENTRY] text" (the entry point omitted where
// the message names none); an iterator counts messages; callbacks receive each new message.
// Callbacks run on a thread of the library's (never inside the call that logged, which may
// hold the connection's lock a callback's CUDA calls would need), one at a time, in order.
// CUDA_LOG_FILE (NVIDIA's variable: stdout, stderr or a path) receives each message too.
#pragma once

#include <cstddef>
#include <cstdint>

#include "vmcuda/cudart_types.h"

namespace vmcuda::guest::program_log {

// cudaLogLevel's values.
enum Severity { kError = 0, kWarning = 1 };

// The most bytes of messages kept (CUDA: "The maximum size of the buffer is 25600 bytes").
inline constexpr size_t kCapacityBytes = 25600;

/// Adds a message (`entry`, the API entry point, may be null). Thread-safe, never throws.
void add(Severity severity, const char* source, const char* entry, const char* text) noexcept;

/// cudaLogsCurrent: the iterator of the next message.
cudaError_t current(unsigned* iterator_out, unsigned flags) noexcept;

/// cudaLogsDumpToMemory: the messages from *iterator (all when null), newline-terminated,
/// NUL after the last; *size in: the buffer's bytes, out: the bytes written less the NUL.
/// When not all fit, a line saying how many were left out comes first, then the newest that
/// fit; when none fits, *size = 0 and cudaErrorInvalidValue. Advances *iterator.
cudaError_t dump_to_memory(unsigned* iterator, char* buffer, size_t* size, unsigned flags) noexcept;

/// cudaLogsDumpToFile: the messages from *iterator (all when null) appended to the file.
cudaError_t dump_to_file(unsigned* iterator, const char* path, unsigned flags) noexcept;

using Callback = cudaLogsCallback_t;
/// cudaLogsRegisterCallback / cudaLogsUnregisterCallback (the handle: an opaque nonzero value).
cudaError_t register_callback(Callback callback, void* data, void** handle_out) noexcept;
cudaError_t unregister_callback(void* handle) noexcept;

/// For tests: forget every message, callback and the count.
void reset_for_testing() noexcept;

}  // namespace vmcuda::guest::program_log
