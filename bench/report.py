# SPDX-License-Identifier: Apache-2.0
# Bench results: comparison rows (median ratios, noise, targets), the printed table, docs/benchmarks.md and the gnuplot PNG.
"""
A Row is one comparison: pairs of (A, B) Results from the same rounds (A = FastTier or the tool under
test, B = the peer), or RSS samples, or a skip/failure reason. The ratio of a round is A/B of the
row's metric (req/s and payload bytes/s give the same ratio for equal object sizes); a row shows the
median ratio, its range over rounds (the noise), and the median absolute figures of both sides.
"""

import os
import statistics
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
MIB = 1024 * 1024


class Row:
    def __init__(self, title, client, a_name, b_name, metric, target, pairs=None, skipped=None,
                 rss=None):
        self.title = title
        self.client = client
        self.a_name, self.b_name = a_name, b_name
        self.metric = metric          # "rps" | "bps" | "rss"
        self.target = target          # ratio >= target, or for rss bytes <= target; None = no target
        self.pairs = pairs or []
        self.skipped = skipped        # reason, when not measured
        self.failed = None            # reason, when measured but unusable
        self.notes = None             # evidence for the "Targets missed" section, when the row has some
        self.rss = rss                # (Sampled target, Sampled nginx, idle bytes)

    def good_pairs(self):
        return [(a, b) for a, b in self.pairs if a is not None and b is not None and b.rps > 0]

    def ratios(self):
        return [a.rps / b.rps for a, b in self.good_pairs()]

    def status(self):
        """None when the row has figures, else the text to show instead."""
        if self.skipped:
            return "not measured: " + self.skipped
        if self.failed:
            return "failed: " + self.failed
        if self.metric != "rss" and not self.good_pairs():
            return "failed: no round where both sides ran without errors (see the raw figures)"
        return None

    def median_ratio(self):
        r = self.ratios()
        return statistics.median(r) if r else None

    def side_median(self, side):
        xs = [p[side] for p in self.good_pairs()]
        if not xs:
            return None
        rps = statistics.median(x.rps for x in xs)
        return rps, rps * xs[0].object_size

    def met(self):
        if self.status() is not None or self.target is None:
            return "-"
        if self.metric == "rss":
            return "yes" if self.rss[0].max_rss <= self.target else "NO"
        r = self.ratios()
        med = statistics.median(r)
        verdict = "yes" if med >= self.target else "NO"
        below = sum(1 for x in r if x < self.target)
        if verdict == "yes" and below:
            verdict += " (%d of %d rounds below)" % (below, len(r))
        elif verdict == "NO" and below < len(r):
            verdict += " (%d of %d rounds above)" % (len(r) - below, len(r))
        return verdict

    def target_text(self):
        if self.target is None:
            return "-"
        if self.metric == "rss":
            return "<= %d MiB" % (self.target // MIB)
        return ">= %.2fx" % self.target

    def cells(self, short=False):
        """[comparison, client, A, B, ratio, range, target, met] as strings; short = for a terminal
        (no side names, short client, "not measured" without its reason)."""
        st = self.status()
        client = self.client.split(",")[0].split(":")[0] if short else self.client
        if st is not None:
            if short:
                st = st.split(":")[0]
            return [self.title, client, st, "-", "-", "-", self.target_text(), "-"]
        a_name, b_name = ("", "") if short else (self.a_name + ": ", self.b_name + ": ")
        if self.metric == "rss":
            ft, ng, idle = self.rss
            return [self.title, client,
                    "%s%.1f MiB max (idle %.1f MiB; %d conns)" % (a_name, ft.max_rss / MIB,
                                                                idle / MIB, ft.max_conns),
                    "%s%.1f MiB max (%d conns)" % (b_name, ng.max_rss / MIB, ng.max_conns),
                    "-", "-", self.target_text(), self.met()]
        r = self.ratios()
        a_rps, a_bps = self.side_median(0)
        b_rps, b_bps = self.side_median(1)
        n_bad = len(self.pairs) - len(r)
        rng = "%.2f-%.2f (%d rounds%s)" % (min(r), max(r), len(r),
                                           ", %d failed" % n_bad if n_bad else "")
        return [self.title, client,
                "%s%s" % (a_name, fmt_abs(a_rps, a_bps, self.metric)),
                "%s%s" % (b_name, fmt_abs(b_rps, b_bps, self.metric)),
                "%.3fx" % statistics.median(r), rng, self.target_text(), self.met()]


def fmt_abs(rps, bps, metric):
    if metric == "bps":
        return "%s MiB/s (%s req/s)" % (format(round(bps / MIB), ","), format(round(rps), ","))
    return "%s req/s (%s MiB/s)" % (format(round(rps), ","), format(round(bps / MIB), ","))


def fmt_rate(r, unit):
    """One run, for the progress lines."""
    if r is None:
        return "-"
    return fmt_abs(r.rps, r.bps, unit)


HEADERS = ["Comparison", "Client", "FastTier / A (median)", "Peer / B (median)", "Ratio A/B",
           "Ratio range", "Target", "Met"]


def table_text(rows):
    """The table as aligned plain text, for the terminal, then the reasons of rows not measured."""
    cells = [["Comparison", "Client", "A (FastTier or tool)", "B (peer)", "Ratio", "Range",
              "Target", "Met"]] + [r.cells(short=True) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(HEADERS))]
    lines = []
    for n, c in enumerate(cells):
        lines.append("  ".join(c[i].ljust(widths[i]) for i in range(len(c))).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    notes = ["  %s (%s): %s" % (r.title, r.client.split(",")[0], r.status())
             for r in rows if r.status() is not None]
    if notes:
        lines += ["", "Rows without figures:"] + notes
    return "\n".join(lines)


def md_escape(s):
    return s.replace("|", "\\|")


def table_markdown(rows):
    out = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    for r in rows:
        out.append("| " + " | ".join(md_escape(c) for c in r.cells()) + " |")
    return "\n".join(out)


# ---------------------------------------------------------------- plot

def plot(rows, datafile, png):
    """Writes the data file and runs bench/throughput.gp. True, or the reason there is no plot."""
    series = []   # (column title, {label: MiB/s})
    labels = []
    for r in rows:
        if not r.title.startswith("Warm GET ") or r.status() is not None:
            continue
        label = r.title[len("Warm GET "):]
        if label not in labels:
            labels.append(label)
        client = "ft-loader" if r.client.startswith("ft-loader") else "wrk"
        for side, name in ((0, "FastTier target"), (1, "nginx sendfile")):
            title = "%s (%s)" % (name, client)
            col = next((s for s in series if s[0] == title), None)
            if col is None:
                col = (title, {})
                series.append(col)
            col[1][label] = r.side_median(side)[1] / MIB
    if not series:
        return "no warm GET row has figures"
    order = {"16 KiB": 0, "128 KiB": 1, "1 MiB": 2, "8 MiB": 3}
    labels.sort(key=lambda x: order.get(x, 9))
    with open(datafile, "w") as f:
        f.write("size " + " ".join('"%s"' % s[0] for s in series) + "\n")
        for label in labels:
            f.write('"%s" ' % label + " ".join(
                "%.1f" % s[1][label] if label in s[1] else "NaN" for s in series) + "\n")
    argv = ["gnuplot", "-e", "datafile='%s'; outfile='%s'; ncols=%d" % (datafile, png, len(series) + 1),
            os.path.join(HERE, "throughput.gp")]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except OSError as e:
        return "gnuplot not runnable: %s (scripts/bench-deps.sh installs gnuplot-nox)" % e
    if p.returncode != 0 or not os.path.exists(png):
        return "gnuplot failed: %s" % p.stderr.strip()[-300:]
    return True


# ---------------------------------------------------------------- perf

PERF_ROWS = [
    ("CPU time of the server per request (us)", "task-clock", 1000.0),   # task-clock is in msec
    ("cycles per request", "cycles", 1.0),
    ("instructions per request", "instructions", 1.0),
    ("context switches per request", "context-switches", 1.0),
    ("syscalls per request (all)", "raw_syscalls:sys_enter", 1.0),
    ("io_uring_enter per request", "syscalls:sys_enter_io_uring_enter", 1.0),
    ("io_uring SQEs per request", "io_uring:io_uring_submit_req", 1.0),
    ("sendfile per request", "syscalls:sys_enter_sendfile64", 1.0),
    ("sendto/send per request", "syscalls:sys_enter_sendto", 1.0),
    ("writev per request", "syscalls:sys_enter_writev", 1.0),
    ("openat per request", "syscalls:sys_enter_openat", 1.0),
    ("fstat (newfstatat) per request", "syscalls:sys_enter_newfstatat", 1.0),
    ("fgetxattr per request", "syscalls:sys_enter_fgetxattr", 1.0),
    ("close per request", "syscalls:sys_enter_close", 1.0),
    ("epoll_wait per request", "syscalls:sys_enter_epoll_wait", 1.0),
    ("recvfrom/recv per request", "syscalls:sys_enter_recvfrom", 1.0),
    ("setsockopt per request", "syscalls:sys_enter_setsockopt", 1.0),
]


def per_request(p, key, scale):
    """Counter key of perf entry p per request of the pass that counted it (None if not counted)."""
    for counters, requests in ((p["hw"], p["hw_requests"]), (p["trace"], p["trace_requests"])):
        if key in counters:
            v = counters[key]
            return None if v is None or requests <= 0 else v * scale / requests
    return None


def perf_summary(p):
    cpu = per_request(p, "task-clock", 1000.0)
    ins = per_request(p, "instructions", 1.0)
    sc = per_request(p, "raw_syscalls:sys_enter", 1.0)
    return "CPU %s us/req, %s instructions/req, %s syscalls/req" % (
        "%.1f" % cpu if cpu is not None else "?", format(round(ins), ",") if ins is not None else "?",
        "%.2f" % sc if sc is not None else "?")


SIDE_NAMES = {"fasttier": "target", "nginx": "nginx"}


def cpu_ratio(perf, label):
    """Server CPU time per request, target / nginx, for label ("16 KiB", "PUT 1 MiB"), or None."""
    if not perf:
        return None
    ft = next((p for p in perf if p["side"] == "fasttier" and p["label"] == label), None)
    ng = next((p for p in perf if p["side"] == "nginx" and p["label"] == label), None)
    a = per_request(ft, "task-clock", 1.0) if ft else None
    b = per_request(ng, "task-clock", 1.0) if ng else None
    return a / b if a and b else None


def perf_markdown(perf):
    cols = perf
    out = ["| per request | " +
           " | ".join("%s %s" % (SIDE_NAMES[p["side"]], p["label"]) for p in cols) + " |",
           "|---|" + "---:|" * len(cols)]
    out.append("| requests/s during the CPU pass | " +
               " | ".join(format(round(p["rps"]), ",") for p in cols) + " |")
    for title, key, scale in PERF_ROWS:
        vals = [per_request(p, key, scale) for p in cols]
        if all(v is None for v in vals):
            continue
        out.append("| %s | " % title + " | ".join(
            "-" if v is None else ("%.2f" % v if v < 100 else format(round(v), ",")) for v in vals) + " |")
    labels = []
    for p in cols:
        if p["label"] not in labels:
            labels.append(p["label"])
    ratios = ["%s %.2fx" % (l, cpu_ratio(perf, l)) for l in labels if cpu_ratio(perf, l)]
    if ratios:
        out += ["", "Server CPU time per request, target / nginx: " + ", ".join(ratios) +
                " (below 1: the target spends less CPU per request than nginx). Unlike throughput, "
                "this hardly depends on what else runs on the machine."]
    return "\n".join(out)


def perf_label_of(row):
    """The perf label matching a row ("Warm GET 16 KiB" -> "16 KiB", "PUT 1 MiB"), or None."""
    if row.title.startswith("Warm GET "):
        return row.title[len("Warm GET "):]
    if row.title.startswith("PUT "):
        return row.title
    return None


def missed_markdown(rows, perf):
    """One paragraph per target missed in this run, with this run's CPU-per-request evidence."""
    out = []
    for r in rows:
        if not r.met().startswith("NO"):
            continue
        cells = r.cells()
        line = "- **%s** (%s): ratio %s against %s; rounds %s." % (r.title, r.client, cells[4],
                                                                   cells[6], cells[5])
        label = perf_label_of(r)
        cr = cpu_ratio(perf, label) if label else None
        if r.metric == "rss":
            line += " The target's RSS exceeds the limit: see the notes above."
        elif r.title.startswith("ft-loader vs wrk"):
            line += (" A client comparison (both drive the same nginx): the loader's own cost, "
                     "see loader/ and docs/loader.md; the servers are not involved.")
            if r.notes:
                line += " " + r.notes
        elif r.notes:
            line += " " + r.notes
        elif cr is None:
            line += " No CPU-per-request figure for this case in this run (perf not collected)."
        elif cr <= 1.0 / r.target:
            line += (" The target's CPU per request is %.2fx nginx's (it may be up to %.2fx for this "
                     "target), so the server's own cost does not explain the miss: the shortfall "
                     "comes from scheduling on the shared cores (see the ratio range); rerun on a "
                     "quiet machine before changing code." % (cr, 1.0 / r.target))
        else:
            line += (" The target's CPU per request is %.2fx nginx's, more than the %.2fx this "
                     "target allows: the server's own cost explains the miss; see the "
                     "recommendations above." % (cr, 1.0 / r.target))
        if r.title == "Warm GET 8 MiB" and r.client.startswith("wrk"):
            line += (" At 8 MiB wrk itself is the bottleneck (it reads 8 KiB per read(2)); the "
                     "ft-loader row of the same size is the one to judge the server by.")
        out.append(line)
    return "\n".join(out) if out else "None: every measured row met its target (by the median ratio)."


def notes_markdown(rows):
    """Every row's notes (CPU splits and the like), also of rows without a target."""
    out = ["- **%s** (%s): %s" % (r.title, r.client.split(",")[0], r.notes) for r in rows if r.notes]
    return "\n".join(out) if out else "None."


# ---------------------------------------------------------------- markdown

def raw_markdown(raw):
    out = ["| what | client | round | A | B |", "|---|---|---:|---|---|"]
    by_key = {}
    for e in raw:
        if "side" in e:
            by_key.setdefault((e["group"], e["label"], e["client"], e["round"]), {})[e["side"]] = e
    for (group, label, client, rnd), sides in by_key.items():
        def show(e):
            if e is None:
                return "-"
            if "failed" in e:
                return "failed: " + md_escape(e["failed"])
            return "%s req/s, %s MiB/s, %d req in %.2f s" % (
                format(round(e["rps"]), ","), format(round(e["bps"] / MIB), ","), e["requests"],
                e["seconds"])
        out.append("| %s %s | %s | %d | %s | %s |" % (group, label, client, rnd + 1,
                                                     show(sides.get("A")), show(sides.get("B"))))
    return "\n".join(out)


def noise_text(rows):
    spreads = []
    for r in rows:
        rs = r.ratios() if r.metric != "rss" and r.status() is None else []
        if len(rs) >= 2:
            med = statistics.median(rs)
            spreads.append((r.title + ", " + r.client.split(",")[0], (max(rs) - min(rs)) / med))
    if not spreads:
        return "Only one round per comparison: no spread to report (run more rounds for that)."
    spreads.sort(key=lambda x: x[1])
    worst = spreads[-1]
    return ("Spread of the per-round ratios (max - min) / median: smallest %.0f%%, median %.0f%%, "
            "largest %.0f%% (%s)." % (spreads[0][1] * 100,
                                      statistics.median(s for _, s in spreads) * 100,
                                      worst[1] * 100, worst[0]))


def write_markdown(path, rows, machine, setup, raw, perf, png_name, plot_status, notes_path):
    mem = machine.get("mem_total", 0) / (1024 ** 3)
    lines = [
        "# FastTier benchmarks",
        "",
        "Written by `make bench` (bench/run.py); do not edit by hand: the analysis in \"Data path\" comes "
        "from bench/datapath.md.",
        "",
        "## Machine and run",
        "",
        "- Date: %s; host %s" % (machine["date"], machine.get("host", "?")),
        "- CPUs (nproc): %d (%s); memory %.1f GiB; kernel %s" % (machine["nproc"], machine["cpu"], mem,
                                                                 machine["kernel"]),
        "- Load average at start / end: %s / %s (other jobs share these cores: read ratios, not "
        "absolute figures)" % (machine["loadavg"], machine.get("loadavg_end", "?")),
        "- Versions: nginx %s, %s, FastTier %s" % (machine["versions"]["nginx"],
                                                   machine["versions"]["wrk"],
                                                   machine["versions"]["git"]),
        "- Command: `%s`; %d rounds of %d s per side, pairs run A, B, A, B...; whole run %.0f s"
        % (setup["command"], setup["rounds"], setup["seconds"], machine.get("seconds", 0)),
        "",
        "## Results",
        "",
        table_markdown(rows),
        "",
        "A is FastTier (or the tool under test), B the peer; the ratio is the median over rounds of "
        "A/B in the same round, the range its min-max over rounds. Absolute figures are the "
        "medians of each side; MiB/s counts object bytes only (requests x object size).",
        "",
        "The data protection rows compare FastTier with itself: A is a bucket with redundancy (mirror 2, "
        "EC 2+1), B the same PUTs into a bucket without. They have no target ratio: they show what the "
        "redundancy costs in PUT throughput on this machine (see docs/data-protection.md).",
        "",
        "Noise: " + noise_text(rows),
        "",
        "## How each row is driven",
        "",
        "- Cluster: 1 proxy + 1 target with 1 mountpath, started by scripts/ftcluster.py; the target "
        "runs its defaults (%s). Objects were PUT through the proxy; one bucket per size: %s."
        % (setup["target_threads"], ", ".join("%s x %d" % (l, n) for l, _, n in setup["sizes"])),
        "- nginx (%d workers, `sendfile on`, `tcp_nopush on`, unlimited keep-alive requests, "
        "`reuseport`): its GET server's root is the target's `<mountpath>/ais`, so it serves the "
        "very files the target wrote (same inodes, same page cache). WebDAV (`dav_methods PUT`) "
        "writes under the same filesystem. Config: bench/nginx.conf.in." % setup["nginx_workers"],
        "- wrk rows: `wrk -t%d -c%d` with bench/wrk-urls.lua, which rotates over every object of "
        "the size (each thread from a random offset), straight to the target's public port and to "
        "nginx. PUT rows: bench/wrk-put.lua, 1 MiB bodies over 16 names (overwrites)."
        % (setup["threads"], setup["conns"]),
        "- ft-loader rows: %s" % ("`%s` with `-direct` (reads the cluster map once, requests go "
                                  "straight to the owning target) over the bucket, and `-url-list` "
                                  "over the same files on nginx; -numworkers %d."
                                  % (setup["loader"], setup["conns"]) if setup["loader"]
                                  else "not run: ft-loader was not built when this report was written."),
        "- ft-loader vs wrk back to back (bench/loadercmp.py): each round ft-loader `-url-list` then wrk, both with "
        "%d connections over the 16 KiB objects on nginx, one right after the other (the \"ft-loader vs wrk\" rows "
        "above pair runs of the warm GET rounds that are two runs apart); the notes give each client's CPU "
        "microseconds per request from getrusage of the client process." % setup["conns"],
        "- GET from disk rows: ft-loader reads every object once (`-epochs 1 -uniquegets`, 8 in "
        "flight) right after the harness evicted the object files from the page cache "
        "(`fdatasync` + `POSIX_FADV_DONTNEED`, checked with `mincore`), before each side's run.",
        "- S3 row: ft-loader with `-s3endpoint <proxy>/s3 -s3-use-path-style` and the cluster's S3 key "
        "pair (the proxy relays the object) against ft-loader on the native API through the proxy "
        "(307 to the target), over the same 128 KiB objects.",
        "- Cold GET row: nginx's third server is the origin; it serves the 8 MiB objects under "
        "`/bench-cold/c<k>/` (4 hard-linked names per file: 256 objects, 2 GiB, in its page cache). "
        "A: the harness destroys and re-creates the `ht://` bucket `bench-cold` (endpoint that "
        "origin), checks no cached copy is left on the mountpath and waits until the target has "
        "deleted the previous copies (`rm.*` in `.work`, so that deletion does not share the cores "
        "with the run), then ft-loader `-provider ht -direct "
        "-epochs 1 -uniquegets` (8 in flight) reads every object once from the owning target, which "
        "fetches it from the origin while streaming it and caches it (all 256 found cached after each "
        "A run). B: ft-loader `-url-list -epochs 1 -uniquegets` reads the same files straight from the "
        "origin. The create-bck with `provider=ht` is the probe: a 501 skips the row. Around each "
        "client run the harness reads the CPU time of the target and of nginx's workers "
        "(/proc/<pid>/stat) and the client's rusage: the CPU seconds per GiB in \"Targets missed\".",
        "- Data protection rows (bench/protect.py): a cluster of their own, 1 proxy + 4 targets x 2 "
        "mountpaths (EC 2+1 needs the owner and 3 other targets, mirror 2 two mountpaths), started after "
        "the other rows; its 8 mountpaths are directories of the build tree, so they share one filesystem. "
        "Buckets `pb-none`, `pb-mirror` (`mirror.copies` 2) and `pb-ec` (2 data + 1 parity "
        "slices, `objsize_limit` 0: every object sliced), protection given at `create-bck`. Each round: "
        "ft-loader `-pctput 100` with 1 MiB objects through the proxy (307 to the owner), -numworkers "
        "%d, into the mirror bucket (A) then the plain one (B), then the same with the EC bucket. After "
        "each A run the harness counts the bucket's files on the mountpaths (an extra copy under "
        "`.copies/`, 3 slices under `.ec/` per acknowledged PUT, else the row fails); after each pair "
        "both buckets are destroyed and re-created (the disks do not fill up) and the harness waits "
        "until every target holds the new bucket metadata and has deleted the old objects." % setup["conns"],
        "- Epoch hints rows (bench/hints.py): a remote `ht://` bucket of 768 objects of 128 KiB (96 MiB) on an nginx "
        "origin of its own, 1 proxy + 1 target whose `lru_quota_bytes` is 64 MiB (the dataset is 1.5x; marks 90/85%), "
        "all run inside a network namespace whose `lo` shapes only the origin's traffic (tc htb, `--hints-rate`; "
        "without the privileges the rows say the origin was not shaped). 3 epochs of a seeded random order "
        "(bench/hintsim.py's `epoch_orders`), 8 GETs in flight straight to the target, on a fresh cluster per "
        "variant: plain LRU (B), the epoch's order hint posted before each epoch (A), and the hint with staging off "
        "(in the notes). Read rate: reads/s of each of epochs 2 and 3 (the inverse of the wall time; goal wall time "
        "<= 0.7x LRU's, so >= 1.43x). Hit rate: 1 - origin GETs (its access log) / reads over epochs 2-3 (goal >= "
        "1.5x), with bench/hintsim.py's LRU and MIN rates for the same order and cache size beside it.",
        "- Copy row (bench/copybck.py): a cluster of its own, 1 proxy + 3 targets x 1 mountpath (directories of "
        "the build tree: one filesystem), 2,048 objects of 1 MiB (2 GiB; 256 with --quick) PUT through the proxy into "
        "`bench-copy-src`, warm in the page cache; one pair of runs before the rounds is not counted. A: one `copy-bck` job into a fresh bucket, from the POST to the "
        "job's end (`GET /v1/jobs/ID` polled every 20 ms), checked afterwards (objects and bytes of every object, no "
        "error, nothing skipped). B: `cp -r <mountpath>/ais/bench-copy-src <dir>` for each target's mountpath, one "
        "after the other: the very files the job copies, to directories beside the mountpaths (no xattrs, no "
        "checksum, no network), file count and bytes checked. After every run, untimed: the destination is removed "
        "(bucket destroyed and its retired trees deleted, or `rm -rf`) and `sync -f` writes the dirty pages back. "
        "Objects/s and MiB/s of wall time; the notes give CPU seconds per GiB of the targets (/proc/<pid>/stat) and "
        "of cp (rusage).",
        "- DataLoader S3 rows (bench/dataloader.py): a cluster of its own, 1 proxy + 1 target; 10,000 samples of "
        "16 KiB and 2,000 of 128 KiB, one object each, PUT through the proxy. A: a map-style torch Dataset whose "
        "`__getitem__` is Debian's boto3 `get_object(...)[\"Body\"].read()` on `<proxy>/s3` (path style, the "
        "cluster's S3 key pair, one client per worker process, one attempt); B: the same Dataset reading the very "
        "object files the target stores with `open().read()`. Both: `DataLoader(num_workers=4, batch_size=32, "
        "shuffle=True)` with the same seeded order, one epoch per run (worker start included), every sample's size "
        "and leading index checked; samples/s of wall time. The notes give CPU ms per sample of proxy + target "
        "(/proc/<pid>/stat) and of the DataLoader's processes (rusage).",
        "- RSS rows: VmRSS of the target from /proc, sampled every 50 ms while wrk holds 256 "
        "connections; the conns figure is the peak of established connections on the port in "
        "/proc/net/tcp (a few from the previous run may still be closing); nginx's figure sums "
        "master and workers (shared pages counted per process).",
        "- Absolute figures drift with the load others put on the machine; the perf section's CPU "
        "time per request does not, which is why the data-path notes lean on it.",
        "",
        "## Throughput by object size",
        "",
    ]
    if png_name:
        lines += ["![Warm GET throughput by object size](%s)" % png_name, ""]
    else:
        lines += ["No plot: %s" % plot_status, ""]
    try:
        with open(notes_path) as f:
            lines += [f.read().rstrip(), ""]
    except OSError:
        lines += ["## Data path", "", "(bench/datapath.md is missing)", ""]
    lines += ["### Targets missed in this run", "", missed_markdown(rows, perf), ""]
    lines += ["### Notes of the rows in this run", "", notes_markdown(rows), ""]
    lines += ["### Counters from this run", ""]
    if perf:
        lines += ["`perf stat -p <server pids>` (nginx: its workers) over one wrk -c32 run per case "
                  "and server (GETs rotating over all objects of the size; PUTs of 1 MiB), divided "
                  "by the requests of the same run: one pass with hardware counters (CPU), one with "
                  "syscall tracepoints (counts; tracepoints slow syscalls, so that pass is not used "
                  "for CPU).", "", perf_markdown(perf), ""]
    else:
        lines += ["Not collected in this run (perf unusable here or --no-perf).", ""]
    lines += ["## Raw figures", "", raw_markdown(raw), ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))
