#!/usr/bin/env python3
"""A stand-in for NVIDIA's nvidia-cuda-mps-control in CI (no GPU, no MPS): what
tests/host-stub/gpu_sharing_test.sh checks the stub does with it.

  fake_mps_control.py -f   the daemon: answers on $CUDA_MPS_PIPE_DIRECTORY/control until a
                           client says quit (or SIGTERM)
  fake_mps_control.py      a client: reads commands on stdin; `quit` ends the daemon
Each start and command is appended to $FAKE_MPS_RECORD with the pipe and log directories."""
import os
import signal
import socket
import sys

pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps")
log = os.environ.get("CUDA_MPS_LOG_DIRECTORY", "/var/log/nvidia-mps")
record = os.environ.get("FAKE_MPS_RECORD", "/dev/null")


def note(line):
    with open(record, "a") as f:
        f.write(line + "\n")


if sys.argv[1:] == ["-f"]:
    note(f"start pid={os.getpid()} pipe={pipe} log={log} cvd={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')} stdin_is_devnull="
         f"{os.path.samefile('/proc/self/fd/0', '/dev/null')} fds={sorted(int(f) for f in os.listdir('/proc/self/fd'))}")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(os.path.join(pipe, "control"))
    s.listen(16)
    with open(os.path.join(pipe, "fake.pid"), "w") as f:
        f.write(str(os.getpid()))
    signal.signal(signal.SIGTERM, lambda *_: (note("daemon SIGTERM"), sys.exit(0)))
    with open(os.path.join(log, "control.log"), "a") as f:
        f.write("fake daemon started\n")
    while True:
        c, _ = s.accept()
        c.close()
elif not sys.argv[1:]:
    for cmd in sys.stdin.read().split("\n"):
        if not cmd:
            continue
        note(f"command {cmd} pipe={pipe}")
        if cmd == "quit":
            with open(os.path.join(pipe, "fake.pid")) as f:
                pid = int(f.read())
            os.unlink(os.path.join(pipe, "control"))
            os.kill(pid, signal.SIGTERM)
else:
    sys.exit(f"fake_mps_control.py: unexpected arguments {sys.argv[1:]}")
