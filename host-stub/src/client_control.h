// The control requests a vmcuda-stub sends to one client's session (vmrpc's
// SlotService::control, run on the client's service thread, in its worker process under
// --isolation process): status, suspend, resume, save and restore. Encoded with the state
// stream's ByteWriter (fixed-width little-endian fields).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "session.h"

namespace vmcuda::host::client_control {

enum class Op : uint32_t {
  kStatus = 1,
  kSuspend,   // to host memory
  kResume,    // from where the suspend or save put the state
  kSave,      // suspend into the state file `path`
  kRestore,   // resume from the state file `path` (kept: a failed restore can be retried)
  // After every client of the VM resumed (or a failed suspend was undone): map and open again
  // what the client had opened of other programs' memory and events (Session::ipc_attach).
  kIpcAttach,
  // Whether a suspend would be refused only for now (Reply::retry, with the reason): asked of
  // every quiesced client before any is suspended, so that waiting costs no copy.
  kSuspendWindow,
};

struct Request {
  Op op = Op::kStatus;
  std::string path;
  // kResume/kRestore: the host GPUs the client's guest devices are from now on (a move to
  // GPUs of the same models); empty: where they were.
  std::vector<int> devices;
};

struct Reply {
  bool ok = false;
  std::string error;
  // Refused for now only: the program is in a window it closes by itself (a stream capture
  // open, a zero pivot not read yet), so the same request may succeed a moment later.
  bool retry = false;
  ClientStatus status;
  uint64_t state_bytes = 0;  // the state written (suspend, save) or read (resume, restore)
  double seconds = 0;        // how long the operation took
};

struct Progress {
  std::string phase;
  uint64_t done = 0, total = 0;
};

namespace testing {
// Tests only: what a resume from host memory reads instead of the suspended state (a damaged
// copy of it, say); the client's own state is kept either way. Unset: the state itself.
extern std::function<std::shared_ptr<const state::MemoryStream>(const std::shared_ptr<const state::MemoryStream>&)>
    resume_state_override;
}  // namespace testing

std::vector<std::byte> encode(const Request& r);
bool decode(std::span<const std::byte> bytes, Request* r);
std::vector<std::byte> encode(const Reply& r);
bool decode(std::span<const std::byte> bytes, Reply* r);
std::vector<std::byte> encode(const Progress& p);
bool decode(std::span<const std::byte> bytes, Progress* p);

}  // namespace vmcuda::host::client_control
