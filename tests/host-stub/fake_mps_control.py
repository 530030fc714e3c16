#!/usr/bin/env python3
"""A stand-in for NVIDIA's nvidia-cuda-mps-control in CI (no GPU, no MPS): what
tests/host-stub/gpu_sharing_test.sh checks the stub does with it.

  fake_mps_control.py -f   the daemon: answers on $CUDA_MPS_PIPE_DIRECTORY/control until a
                           client says quit (or SIGTERM)
  fake_mps_control.py      a client: reads commands on stdin; `quit` ends the daemon
Each start and command is appended to $FAKE_MPS_RECORD with the pipe and log directories.

Clients, as NVIDIA's control commands see them (tests/security/kernel_time_limit_mps_test.sh):
  get_server_list          the daemon's pid (one server)
  get_client_list SERVER   the live processes pointed at this pipe directory (workers), less
                           those terminated, plus those whose termination was refused (a
                           client killed with its work outstanding stays in its server)
  terminate_client S C     answers 0 (as NVIDIA's) and lets C go; with FAKE_MPS_TERMINATE=refuse
                           answers CUDA_ERROR_NOT_SUPPORTED and keeps listing C, dead or alive,
                           until the daemon is started again (its pipe directory emptied)"""
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
    def pids(name):
        try:
            with open(os.path.join(pipe, name)) as f:
                return {int(p) for p in f.read().split()}
        except FileNotFoundError:
            return set()

    def add_pid(name, pid):
        with open(os.path.join(pipe, name), "a") as f:
            f.write(f"{pid}\n")

    def daemon_pid():
        with open(os.path.join(pipe, "fake.pid")) as f:
            return int(f.read())

    def live_clients():
        found = set()
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    env = f.read().split(b"\0")
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmdline = f.read()
            except OSError:
                continue
            # Not this daemon's own processes (python3 fake_mps_control.py ...).
            ours = any(a.endswith(b"fake_mps_control.py") for a in cmdline.split(b"\0")[:2])
            if f"CUDA_MPS_PIPE_DIRECTORY={pipe}".encode() in env and not ours:
                found.add(int(entry))
        return found

    for cmd in sys.stdin.read().split("\n"):
        if not cmd:
            continue
        note(f"command {cmd} pipe={pipe}")
        words = cmd.split()
        if cmd == "quit":
            pid = daemon_pid()
            try:
                os.unlink(os.path.join(pipe, "control"))
                os.kill(pid, signal.SIGTERM)
            except OSError:
                pass  # gone already (its server was killed)
        elif words == ["get_server_list"]:
            print(daemon_pid())
        elif words[:1] == ["get_client_list"] and len(words) == 2:
            if int(words[1]) == daemon_pid():
                for pid in sorted((live_clients() - pids("terminated")) | pids("stuck")):
                    print(pid)
        elif words[:1] == ["terminate_client"] and len(words) == 3:
            if os.environ.get("FAKE_MPS_TERMINATE") == "refuse":
                add_pid("stuck", int(words[2]))
                print("CUDA_ERROR_NOT_SUPPORTED")
            else:
                add_pid("terminated", int(words[2]))
                print("0")  # as NVIDIA's daemon answers (driver 580)
        else:
            print(f"unknown command {cmd}")
else:
    sys.exit(f"fake_mps_control.py: unexpected arguments {sys.argv[1:]}")
