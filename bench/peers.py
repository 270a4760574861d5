# SPDX-License-Identifier: Apache-2.0
# nginx as the bench peer: renders bench/nginx.conf.in into a scratch dir, starts, finds its workers, stops by pid.
"""
One nginx master serves three loopback ports (see nginx.conf.in): the sendfile GET baseline whose root
is the target's mountpath (so both servers read the very same files and page-cache pages), the
WebDAV PUT baseline, and the HTTP origin for cold GETs. It runs in the foreground of its own session
(`daemon off`), with every path under the scratch dir (-p, -e, pid, temp paths), and is stopped with
SIGQUIT to the master, then SIGKILL if it lingers.
"""

import os
import signal
import socket
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
NGINX = "/usr/sbin/nginx"


class PeerError(Exception):
    """A peer could not be started; the message says why (with the error log's tail)."""


def wait_port(host, port, timeout, proc=None):
    """Waits until host:port accepts a TCP connection. False on timeout or when proc exited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def children(pid):
    """Pids whose parent is pid (from /proc)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d, "rb") as f:
                stat = f.read().decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            out.append(int(d))
    return sorted(out)


class Nginx:
    """An nginx master with its workers, configured from nginx.conf.in under directory."""

    def __init__(self, directory, get_root, dav_root, origin_root, ports, workers):
        self.dir = os.path.abspath(directory)
        self.get_root = get_root
        self.dav_root = dav_root
        self.origin_root = origin_root
        self.get_port, self.dav_port, self.origin_port = ports
        self.workers = workers
        self.proc = None

    @property
    def conf_path(self):
        return os.path.join(self.dir, "conf", "nginx.conf")

    @property
    def error_log(self):
        return os.path.join(self.dir, "error.log")

    def render(self):
        with open(os.path.join(HERE, "nginx.conf.in")) as f:
            text = f.read()
        # Workers run as "nobody" under a root master unless told otherwise; the target's files and
        # directories are not world-readable, so a root master runs its workers as root here.
        user_line = "user root;" if os.geteuid() == 0 else ""
        values = {"DIR": self.dir, "WORKERS": str(self.workers), "USER_LINE": user_line,
                  "GET_PORT": str(self.get_port), "DAV_PORT": str(self.dav_port),
                  "ORIGIN_PORT": str(self.origin_port), "GET_ROOT": self.get_root,
                  "DAV_ROOT": self.dav_root, "ORIGIN_ROOT": self.origin_root}
        for key, val in values.items():
            text = text.replace("@%s@" % key, val)
        if "@" in "".join(line.split("#")[0] for line in text.splitlines()):
            raise PeerError("nginx.conf.in has a placeholder the harness does not fill")
        for d in ("conf", "tmp", "logs", self.dav_root, self.origin_root):
            os.makedirs(os.path.join(self.dir, d), exist_ok=True)
        with open(self.conf_path, "w") as f:
            f.write(text)

    def start(self, timeout=10.0):
        self.render()
        argv = [NGINX, "-p", self.dir, "-c", self.conf_path, "-e", self.error_log, "-g", "daemon off;"]
        test = subprocess.run(argv[:-2] + ["-t"], capture_output=True, text=True)
        if test.returncode != 0:
            raise PeerError("nginx -t failed:\n%s" % test.stderr)
        with open(os.path.join(self.dir, "stderr.log"), "ab") as errf:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=errf, stderr=errf,
                                         start_new_session=True, close_fds=True)
        for port in (self.get_port, self.dav_port, self.origin_port):
            if not wait_port("127.0.0.1", port, timeout, self.proc):
                tail = self.log_tail()
                self.stop()
                raise PeerError("nginx did not answer on port %d:\n%s" % (port, tail))
        deadline = time.monotonic() + timeout
        while len(self.worker_pids()) < self.workers and time.monotonic() < deadline:
            time.sleep(0.05)

    def worker_pids(self):
        return children(self.proc.pid) if self.proc is not None else []

    def pids(self):
        """Master and workers: what RSS and perf are taken over."""
        return ([self.proc.pid] if self.proc is not None else []) + self.worker_pids()

    def log_tail(self, lines=20):
        try:
            with open(self.error_log, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return "(no error log)"

    def stop(self, timeout=5.0):
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGQUIT)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            # The master's own session: its process group is exactly nginx's master and workers.
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)


def run_checked(argv, error):
    """Runs argv; raises error (an exception class) naming the command, its exit code and output when it fails."""
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0:
        raise error("%s: exit %d: %s" % (" ".join(argv), p.returncode, (p.stderr or p.stdout).strip()[:300]))


def stop_master(proc):
    """Stops an nginx master started in its own process group: SIGQUIT (graceful), SIGKILL to the group after 5 s."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGQUIT)
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)
