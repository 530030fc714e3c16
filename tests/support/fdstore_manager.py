#!/usr/bin/env python3
"""A small stand-in for systemd's service manager, for tests where no systemd runs (CI
containers): it starts a service with $NOTIFY_SOCKET, keeps the fds the service stores
(FDSTORE=1, FDNAME=, FDSTOREREMOVE=1), drops a stored fd whose peer hung up (POLLHUP or
POLLERR, as systemd does), and on a restart passes them back as systemd does: fds from 3
on, LISTEN_FDS, LISTEN_FDNAMES, LISTEN_PID. Only the parts of sd_notify(3) and
sd_listen_fds(3) that vmcuda-stub uses.

  fdstore_manager.py DIR -- PROGRAM ARGS...

Signals: SIGUSR1 restarts the service (SIGTERM, wait, start again: systemctl restart);
SIGUSR2 kills it (SIGKILL) and starts it again (Restart=on-failure after a crash); SIGTERM
stops it (SIGTERM, wait), closes the store and exits. Events are appended to DIR/events,
one per line: "started N PID FDS", "ready N", "exited N STATUS", "stored NAME",
"removed NAME", "dropped NAME" (hung up), "stopped". The service's stderr goes to
DIR/service.log.
"""
import array
import os
import select
import signal
import socket
import sys
import time


def main():
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.exit("usage: fdstore_manager.py DIR -- PROGRAM ARGS...")
    work, argv = sys.argv[1], sys.argv[3:]
    events = open(os.path.join(work, "events"), "a", buffering=1)
    log = os.open(os.path.join(work, "service.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def event(text):
        events.write(text + "\n")

    notify_path = os.path.join(work, "notify")
    if os.path.exists(notify_path):
        os.unlink(notify_path)
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(notify_path)
    notify.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)

    store = []  # [name, fd], in the order stored (systemd passes them in some order too)
    requests = []
    for s in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM, signal.SIGINT):
        signal.signal(s, lambda signo, _f: requests.append(signo))
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)

    generation = 0

    def start():
        nonlocal generation
        generation += 1
        fds = [fd for _, fd in store]
        names = ":".join(name for name, _ in store)
        pid = os.fork()
        if pid == 0:
            try:
                os.dup2(log, 2)  # before 3.. are taken: log may be one of them
                high = [fcntl_dupfd(os.dup(fd), 1000 + i) for i, fd in enumerate(fds)]  # out of the way
                for i, fd in enumerate(high):
                    os.dup2(fd, 3 + i)  # dup2 clears FD_CLOEXEC
                env = dict(os.environ)
                env["NOTIFY_SOCKET"] = notify_path
                for k in ("LISTEN_FDS", "LISTEN_FDNAMES", "LISTEN_PID"):
                    env.pop(k, None)
                if fds:
                    env["LISTEN_FDS"] = str(len(fds))
                    env["LISTEN_FDNAMES"] = names
                    env["LISTEN_PID"] = str(os.getpid())
                os.closerange(3 + len(fds), 1000 + len(fds) + 1)
                os.execve(argv[0], argv, env)
            except BaseException as e:  # noqa: BLE001 - report anything, then leave
                os.write(2, f"fdstore_manager: cannot start {argv[0]}: {e}\n".encode())
            os._exit(127)
        event(f"started {generation} {pid} {len(fds)}")
        return pid

    def fcntl_dupfd(fd, at_least):
        import fcntl
        new = fcntl.fcntl(fd, fcntl.F_DUPFD, at_least)
        os.close(fd)
        return new

    def drop_hung_up():
        if not store:
            return
        p = select.poll()
        for _, fd in store:
            p.register(fd, 0)  # POLLHUP and POLLERR are always reported
        bad = {fd for fd, ev in p.poll(0) if ev & (select.POLLHUP | select.POLLERR | select.POLLNVAL)}
        for name, fd in [x for x in store if x[1] in bad]:
            event(f"dropped {name}")
            os.close(fd)
            store.remove([name, fd])

    def receive():
        fds = array.array("i")
        msg, anc, _flags, _addr = notify.recvmsg(4096, socket.CMSG_SPACE(253 * fds.itemsize))
        got = []
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
                got.extend(fds)
        fields = dict(line.split("=", 1) for line in msg.decode(errors="replace").split("\n") if "=" in line)
        name = fields.get("FDNAME", "stored")
        if fields.get("FDSTORE") == "1":
            for fd in got:
                store.append([name, fd])
                event(f"stored {name}")
            got = []
        if fields.get("FDSTOREREMOVE") == "1":
            for x in [x for x in store if x[0] == name]:
                os.close(x[1])
                store.remove(x)
                event(f"removed {name}")
        for fd in got:  # fds with a message that does not store them
            os.close(fd)
        if fields.get("READY") == "1":
            event(f"ready {generation}")

    def wait_exit(pid, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            while True:  # the service's last messages (FDSTOREREMOVE, STOPPING) first
                r, _, _ = select.select([notify], [], [], 0)
                if not r:
                    break
                receive()
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return status
            time.sleep(0.02)
        os.kill(pid, signal.SIGKILL)
        return os.waitpid(pid, 0)[1]

    pid = start()
    while True:
        r, _, _ = select.select([notify, wake_r], [], [], 0.2)
        if notify in r:
            receive()
        if wake_r in r:
            os.read(wake_r, 64)
        if pid:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                event(f"exited {generation} {status}")
                pid = 0
        while requests:
            signo = requests.pop(0)
            if signo == signal.SIGUSR1 and pid:
                os.kill(pid, signal.SIGTERM)
                event(f"exited {generation} {wait_exit(pid, 60)}")
            elif signo == signal.SIGUSR2 and pid:
                os.kill(pid, signal.SIGKILL)
                event(f"exited {generation} {os.waitpid(pid, 0)[1]}")
            elif signo in (signal.SIGTERM, signal.SIGINT):
                if pid:
                    os.kill(pid, signal.SIGTERM)
                    event(f"exited {generation} {wait_exit(pid, 60)}")
                for _, fd in store:
                    os.close(fd)
                event("stopped")
                return
            else:
                continue
            drop_hung_up()
            pid = start()


if __name__ == "__main__":
    main()
