# SPDX-License-Identifier: Apache-2.0
# What the bench reads from the system: machine info, VmRSS and connection counts from /proc, perf stat counters.
"""
rss_bytes() sums VmRSS over pids (for nginx, master + workers: shared pages count once per process,
so the nginx figure is an upper bound). sample_during() runs a client while a thread samples RSS and
the established connections on a port (from /proc/net/tcp*, so no ss needed) every 50 ms.
perf_during() attaches `perf stat` to pids for the length of one client run; counts are divided by
the requests of that run by the report.
"""

import ctypes
import mmap
import os
import platform
import resource
import subprocess
import threading
import time

PERF = "/usr/bin/perf"

# Per-request evidence for the data-path notes, in two passes: CPU cost with hardware counters only
# (syscall tracepoints slow every syscall, which would tilt the figure against the server making
# more of them), then which syscalls serve a request (counts are not skewed by that overhead).
PERF_HW = ["task-clock", "cycles", "instructions", "context-switches"]
PERF_TRACE = [
    "raw_syscalls:sys_enter",
    "syscalls:sys_enter_io_uring_enter", "io_uring:io_uring_submit_req",
    "syscalls:sys_enter_sendfile64", "syscalls:sys_enter_sendto", "syscalls:sys_enter_writev",
    "syscalls:sys_enter_openat", "syscalls:sys_enter_newfstatat", "syscalls:sys_enter_fgetxattr",
    "syscalls:sys_enter_close", "syscalls:sys_enter_epoll_wait", "syscalls:sys_enter_recvfrom",
    "syscalls:sys_enter_setsockopt",
]


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def mem_total():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def machine_info():
    return {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "nproc": os.cpu_count() or 0,
            "cpu": cpu_model(), "kernel": platform.release(), "mem_total": mem_total(),
            "loadavg": loadavg(), "host": platform.node()}


def _first_line(argv):
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    out = (p.stdout + p.stderr).strip().splitlines()
    return out[0] if out else "?"


def versions(bindir):
    return {"nginx": _first_line(["/usr/sbin/nginx", "-v"]).replace("nginx version: ", ""),
            "wrk": _first_line(["/usr/bin/wrk", "-v"]).split(" [")[0],
            "git": _first_line(["git", "-C", os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "describe", "--always", "--dirty"])}


def rss_bytes(pids):
    total = 0
    for pid in pids:
        try:
            with open("/proc/%d/status" % pid) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
                        break
        except OSError:
            pass
    return total


def established(port):
    """Established TCP connections whose local port is port (IPv4 and IPv6)."""
    n = 0
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    local, state = parts[1], parts[3]
                    if state == "01" and int(local.rsplit(":", 1)[1], 16) == port:
                        n += 1
        except OSError:
            pass
    return n


class Sampled:
    def __init__(self):
        self.max_rss = 0
        self.max_conns = 0
        self.result = None
        self.error = None


def sample_during(run, pids, port, interval=0.05):
    """Runs run() (a client) while sampling RSS of pids and connections on port. Returns Sampled."""
    out = Sampled()
    stop = threading.Event()

    def sampler():
        while not stop.is_set():
            out.max_rss = max(out.max_rss, rss_bytes(pids))
            out.max_conns = max(out.max_conns, established(port))
            stop.wait(interval)

    th = threading.Thread(target=sampler, daemon=True)
    th.start()
    try:
        out.result = run()
        if out.result.errors:
            out.error = "client errors: %s" % out.result.detail
    except Exception as e:  # a client failure is reported in the row, not raised
        out.error = str(e).splitlines()[0]
    finally:
        stop.set()
        th.join()
    return out


def proc_cpu_seconds(pids):
    """User + system CPU seconds so far of the processes pids (all their threads), from /proc/<pid>/stat."""
    tck = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tck
    return total


def children_cpu_seconds():
    """User + system CPU seconds of this process's waited-for children so far (the client runs)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def perf_usable():
    """(True, None) when perf can count hardware events and tracepoints here, else (False, why)."""
    if not os.access(PERF, os.X_OK):
        return False, "%s not installed (Debian linux-perf)" % PERF
    p = subprocess.run([PERF, "stat", "-x,", "-e", "instructions,raw_syscalls:sys_enter", "true"],
                       capture_output=True, text=True)
    if p.returncode != 0 or "<not supported>" in p.stderr or "<not counted>" in p.stderr:
        return False, "perf stat cannot count here: %s" % (p.stderr.strip().splitlines() or ["?"])[-1]
    return True, None


class PerfRun:
    def __init__(self):
        self.counters = {}
        self.result = None
        self.error = None


def perf_during(run, pids, seconds, path, events):
    """perf stat of events on pids (CSV into path) while run() (a client of `seconds`) goes."""
    out = PerfRun()
    argv = [PERF, "stat", "-x,", "-o", path, "-e", ",".join(events),
            "-p", ",".join(str(p) for p in pids), "--", "sleep", str(seconds + 0.5)]
    try:
        perf = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    except OSError as e:
        out.error = "cannot run perf: %s" % e
        return out
    time.sleep(0.2)  # attach before the load starts
    try:
        out.result = run()
    except Exception as e:
        out.error = str(e).splitlines()[0]
    _, err = perf.communicate(timeout=seconds + 30)
    if perf.returncode != 0:
        out.error = out.error or "perf stat exit %d: %s" % (perf.returncode, err.strip()[-300:])
    try:
        with open(path) as f:
            for line in f:
                parts = line.strip().split(",")
                if len(parts) < 3 or line.startswith("#"):
                    continue
                try:
                    out.counters[parts[2]] = float(parts[0])
                except ValueError:
                    out.counters[parts[2]] = None   # <not counted> / <not supported>
    except OSError as e:
        out.error = out.error or "no perf output: %s" % e
    finally:
        if os.path.exists(path):
            os.unlink(path)
    if out.result is not None and out.result.errors:
        out.error = out.error or "client errors: %s" % out.result.detail
    return out


_libc = None


def resident_pages(path):
    """Pages of the file in the page cache (mincore(2) over a private mapping; reads nothing)."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    size = os.path.getsize(path)
    if size == 0:
        return 0
    page = mmap.PAGESIZE
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY)
    try:
        buf = (ctypes.c_char * size).from_buffer(mm)
        vec = (ctypes.c_ubyte * ((size + page - 1) // page))()
        rc = _libc.mincore(ctypes.addressof(buf), size, vec)
        del buf
        if rc != 0:
            raise OSError(ctypes.get_errno(), "mincore %s" % path)
        return sum(v & 1 for v in vec)
    finally:
        mm.close()


def evict_files(paths, attempts=8):
    """Drops the files' pages from the page cache (written back first), so the next reads come
    from the disk. Retries files that keep pages (under writeback); returns how many still do."""
    left = list(paths)
    for attempt in range(attempts):
        for path in left:
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fdatasync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
        left = [p for p in left if resident_pages(p) > 0]
        if not left:
            break
        time.sleep(0.05 * (attempt + 1))
    return len(left)


def resident_bytes(paths):
    """Bytes of the files' pages in the page cache now."""
    return sum(resident_pages(p) for p in paths) * mmap.PAGESIZE


def warm_files(paths):
    """Reads the files once, so their pages are back in the page cache."""
    for path in paths:
        with open(path, "rb", buffering=0) as f:
            while f.read(1 << 20):
                pass



class PinnedFiles:
    """Keeps files' pages in the page cache while open (with): each file mapped shared read-only and
    mlock(2)ed, so no reclaim (kswapd, or a proactive one such as DAMON's pageout) evicts them; the
    servers' reads are not changed. why is set (and nothing pinned) when mmap or mlock is refused."""

    def __init__(self, paths):
        self.paths, self.maps, self.why = list(paths), [], None
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.mmap.restype = ctypes.c_void_p
        self.libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                                   ctypes.c_int, ctypes.c_long]
        self.libc.mlock.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        self.libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]

    def __enter__(self):
        for path in self.paths:
            size = os.path.getsize(path)
            if size == 0:
                continue
            fd = os.open(path, os.O_RDONLY)
            try:
                addr = self.libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
            finally:
                os.close(fd)
            if addr is None or addr == ctypes.c_void_p(-1).value:
                self.why = "mmap %s: %s" % (path, os.strerror(ctypes.get_errno()))
                break
            self.maps.append((addr, size))
            if self.libc.mlock(addr, size) != 0:  # faults the pages in (reads them if evicted)
                self.why = "mlock: %s" % os.strerror(ctypes.get_errno())
                break
        if self.why:
            self.__exit__()
        return self

    def __exit__(self, *exc):
        for addr, size in self.maps:
            self.libc.munmap(addr, size)
        self.maps = []
