# SPDX-License-Identifier: Apache-2.0
# `make bench` row of the load client itself: ft-loader against wrk on the same nginx at 16 KiB, back to back, with CPU per request.
"""
DESIGN
Issue 16 item 6: ft-loader must never be the bottleneck: >= 1.0x wrk's rate on nginx at 16 KiB in
every round. The "ft-loader vs wrk" rows of the full run reuse the warm GET runs, where the two
clients' nginx runs are two runs apart; this row runs them back to back instead, each round A then B:

A: ft-loader -url-list over the 16 KiB objects on nginx, -numworkers <conns> (the warm GET rows'
   setting), for <seconds>;
B: wrk -t<threads> -c<conns> with bench/wrk-urls.lua over the same files, for <seconds>.

Both against the main bench's nginx, whose root is the target's mountpath. Around each run the harness
reads the CPU time of its waited-for children (getrusage RUSAGE_CHILDREN: the client alone, all its
threads, user + system), divided by the run's requests: the notes give each client's CPU microseconds
per request (medians over the rounds), the figure that does not depend on how much of the shared cores
the client got. Target ratio 1.0, every round (the Met column counts the rounds below).
"""
import statistics

import report
import sysprobe

TITLE = "ft-loader vs wrk back to back, nginx 16 KiB"


def _timed(run, into):
    """run() (one client run); appends its CPU microseconds per request to into."""
    c0 = sysprobe.children_cpu_seconds()
    r = run()
    c1 = sysprobe.children_cpu_seconds()
    if r.requests and not r.errors:
        into.append((c1 - c0) * 1e6 / r.requests)
    return r


def bench_loader_vs_wrk(b):
    """Appends the row (A = ft-loader, B = wrk, both on nginx) to b.rows."""
    a = b.args
    s = next((x for x in b.sets if x.label == "16 KiB"), None)
    desc = ("ft-loader -url-list -numworkers %d (A) then wrk -t%d -c%d (B), %d s each, same nginx, same files"
            % (a.conns, a.threads, a.conns, a.seconds))
    if s is None or b.loader is None:
        b.rows.append(report.Row(TITLE, desc, "ft-loader", "wrk", "rps", 1.0,
                                 skipped=b.skip_reason("ft-loader") if s else "the 16 KiB object set is not there"))
        return
    cpu = {"A": [], "B": []}
    pairs = []
    for rnd in range(a.rounds):
        pairs.append(b.pair("client", s.label, "both", rnd,
                            lambda: _timed(lambda: b.run_get("ft-loader", "nginx", s), cpu["A"]),
                            lambda: _timed(lambda: b.run_get("wrk", "nginx", s), cpu["B"]), "rps"))
    row = report.Row(TITLE, desc, "ft-loader", "wrk", "rps", 1.0, pairs=pairs)
    if cpu["A"] and cpu["B"]:
        la, lb = statistics.median(cpu["A"]), statistics.median(cpu["B"])
        row.notes = ("client CPU per request (rusage of the client process, medians of %d/%d runs): ft-loader "
                     "%.1f us, wrk %.1f us (%.2fx); per round: ft-loader %s, wrk %s"
                     % (len(cpu["A"]), len(cpu["B"]), la, lb, la / lb,
                        " ".join("%.1f" % x for x in cpu["A"]), " ".join("%.1f" % x for x in cpu["B"])))
    b.rows.append(row)
