// A fatal signal in vmcuda-stub (or a worker) leaves one line naming the signal and the call
// stack on stderr (the journal), so a crash under load is never silent; then the process dies
// of the same signal as before (core dump, systemd's restart policy).
#pragma once

namespace vmcuda::host {

void install_crash_report();

}  // namespace vmcuda::host
