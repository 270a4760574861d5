#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# CPU per PUT of every node for EC 2+1 against no redundancy (1 MiB PUTs, 1 proxy + 4 targets x 2 mountpaths), optionally profiled and grouped by cost.
"""
DESIGN
The bench rows of bench/protect.py give rate ratios and the targets' CPU in all; this tool says where
that CPU goes. It starts its own cluster (bench/protect.py's shape and buckets), then for each round
runs ft-loader PUTs into pb-ec and pb-none (bench/loadgen.py), and prints for each run the CPU
milliseconds per PUT of every target and of the proxy (user + system, /proc/<pid>/stat) and the new
public-port connections per PUT (ft_http_connections_total). With --perf DIR, the first round runs
`perf record -g` on the four targets (files DIR/ec.data, DIR/none.data) and prints the samples
grouped into the cost categories of docs/data-protection.md (by symbol; approximate by nature).

  scripts/protect-profile.py [--bindir build/bin] [--seconds 8] [--rounds 2] [--perf DIR]
  scripts/protect-profile.py --group FILE --ms MS     (only the grouping of a perf file)
"""
import argparse
import http.client
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "bench")]

import ftcluster  # noqa: E402
import loadgen  # noqa: E402
import protect  # noqa: E402
import sysprobe  # noqa: E402

# First match wins; symbols of the kernel and of the daemons alike.
CATEGORIES = [
    ("file creation (ext4 inode scan)",
     r"recently_deleted|__brelse|_find_next_zero_bit|find_inode_bit|ext4_read_inode_bitmap|__ext4_new_inode"),
    ("page-cache fill",
     r"copy_folio_from_iter_atomic|block_commit_write|ext4_.*|clear_page.*|mark_buffer_dirty|folio.*|__folio.*|"
     r"filemap_add.*|create_empty_buffers|memcg1_commit_charge|__filemap_get_folio.*|find_get_block.*|"
     r"generic_perform_write|balance_dirty.*|xas_.*|lru_.*|__dquot.*|__pi_memset|alloc_pages.*|rmqueue.*|"
     r"get_page_from_freelist|__block_commit_write|block_write_begin|__mark_inode_dirty"),
    ("socket copies + TCP (+ the encode's read)",
     r"_copy_to_iter|_copy_from_iter|copy_page_to_iter|tcp_.*|__tcp_.*|skb_.*|__skb_.*|ip_.*|__ip_.*|inet_.*|"
     r"__inet_.*|sock_.*|__sock_.*|__dev_queue_xmit|net_rx_action|process_backlog|__netif_.*|bbr_.*|"
     r"loopback_xmit|sk_.*|__sk_.*|handle_softirqs|_raw_spin_unlock_irqrestore|__sys_recvfrom|__sys_sendmsg|"
     r"____sys_sendmsg|filemap_read|filemap_get_read_batch"),
    ("checksums + encode", r"XXH.*|gf_.*|ec_encode.*"),
    ("user copies, malloc, faults",
     r"__memmove.*|__memcpy.*|malloc|_int_malloc|_int_free|cfree.*|free|exc_page_fault|do_anonymous_page|"
     r"handle_mm_fault|__handle_mm_fault|__memset.*|___slab_alloc|kmem_cache_alloc.*|__kmalloc.*|kfree|"
     r"kmem_cache_free"),
    ("scheduling, futex, poll, wakeups",
     r"finish_task_switch.*|__schedule|schedule.*|futex_.*|__futex_.*|pthread_.*|__pthread.*|__GI___pthread.*|"
     r"do_sys_poll|sock_poll|_raw_spin_unlock_irq|try_to_wake_up|enqueue_.*|dequeue_.*|select_task_rq.*|"
     r"update_curr|io_.*|__io_.*|irqentry_exit_to_user_mode|exit_to_user_mode_loop|__lll_lock_wait|"
     r"__GI___lll_lock_wait"),
]


def group(perf_file, ms):
    """[(category, share, ms)] of the samples in perf_file, ms the CPU per PUT they stand for."""
    out = subprocess.run(["perf", "report", "-i", perf_file, "--no-children", "--sort", "sym", "-g", "none", "-q"],
                         capture_output=True, text=True, check=True).stdout
    rx = [(name, re.compile("^(%s)$" % pat)) for name, pat in CATEGORIES]
    tot = dict((name, 0.0) for name, _ in CATEGORIES)
    tot["other"] = 0.0
    for line in out.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+\[[.k]\]\s+(\S+)", line)
        if m:
            name = next((n for n, r in rx if r.match(m.group(2))), "other")
            tot[name] += float(m.group(1))
    return [(name, pct, pct * ms / 100.0) for name, pct in tot.items()]


def print_group(perf_file, ms):
    print("  %s (%.2f ms per PUT):" % (perf_file, ms))
    for name, pct, part in group(perf_file, ms):
        print("    %-45s %5.1f%%  %.2f ms" % (name, pct, part))


def connections(cl):
    """Connections the targets' public ports accepted so far, summed."""
    total = 0.0
    for t in cl.targets:
        c = http.client.HTTPConnection(t.public_url.split("//", 1)[1], timeout=30)
        try:
            c.request("GET", "/metrics")
            for line in c.getresponse().read().decode().splitlines():
                if line.startswith("ft_http_connections_total"):
                    total += float(line.split()[-1])
        finally:
            c.close()
    return total


def free_base():
    for _ in range(100):
        base = random.randrange(45100, 46600)
        if all(ftcluster.port_free("127.0.0.1", p) for p in range(base, base + 12)):
            return base
    raise SystemExit("no free block of ports in 45100-46700")


def run(a):
    d = tempfile.mkdtemp(prefix="protect-profile.")
    cl = ftcluster.Cluster(d, free_base(), targets=protect.TARGETS, mountpaths=protect.MOUNTPATHS,
                           bindir=a.bindir)
    loader = loadgen.Loader(os.path.join(a.bindir, "ft-loader"))
    cl.start()
    try:
        for name in ("none", "ec"):
            protect._recreate(cl, name)
        protect._settle(cl)
        for rnd in range(a.rounds):
            for name in ("ec", "none"):
                pids = [t.pid for t in cl.targets] + [cl.proxy.pid]
                k0, c0 = connections(cl), [sysprobe.proc_cpu_seconds([p]) for p in pids]
                rec = None
                if a.perf and rnd == 0:
                    rec = subprocess.Popen(["perf", "record", "-g", "-o", os.path.join(a.perf, name + ".data"), "-p",
                                            ",".join(str(p) for p in pids[:-1]), "--", "sleep", str(a.seconds - 1)],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                res = loader.run_put_native(cl.port, protect._bucket(name), protect.PUT_SIZE, a.seconds, a.conns)
                if rec is not None:
                    rec.wait()
                c1, k1 = [sysprobe.proc_cpu_seconds([p]) for p in pids], connections(cl)
                n = max(res.requests, 1)
                per = [1000.0 * (y - x) / n for x, y in zip(c0, c1)]
                print("round %d %-4s PUTs %5d errors %d (%6.1f/s)  targets' CPU ms/PUT %s = %.2f  proxy %.2f  "
                      "new connections/PUT %.3f  load %s" % (
                          rnd, name, res.requests, res.errors, res.requests / a.seconds,
                          " ".join("%.2f" % x for x in per[:-1]), sum(per[:-1]), per[-1], (k1 - k0) / n,
                          open("/proc/loadavg").read().split()[0]), flush=True)
                if rec is not None:
                    print_group(os.path.join(a.perf, name + ".data"), sum(per[:-1]))
                protect._recreate(cl, name)
                protect._settle(cl)
    finally:
        cl.stop()
        shutil.rmtree(d, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bindir", default=os.path.join(HERE, "..", "build", "bin"))
    p.add_argument("--seconds", type=int, default=8)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--conns", type=int, default=32, help="ft-loader -numworkers (the bench's default)")
    p.add_argument("--perf", help="directory for perf record files of the first round")
    p.add_argument("--group", help="only group this perf file (with --ms)")
    p.add_argument("--ms", type=float, default=100.0, help="CPU per PUT the --group file stands for")
    a = p.parse_args()
    if a.group:
        print_group(a.group, a.ms)
        return 0
    a.bindir = os.path.abspath(a.bindir)
    if a.perf:
        os.makedirs(a.perf, exist_ok=True)
    run(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
