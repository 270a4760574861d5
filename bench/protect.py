# SPDX-License-Identifier: Apache-2.0
# `make bench` rows of data protection: PUT throughput with mirror 2 and with EC 2+1, each against no redundancy.
"""
DESIGN
EC 2+1 needs an owner plus three other targets, and mirroring needs two mountpaths per target, so
these rows run on a cluster of their own: 1 proxy + 4 targets x 2 mountpaths (the other rows use one
target, the unit compared with one nginx). Three buckets, alike but for their protection properties
(given in the create-bck value, as docs/data-protection.md "Configuring" shows): pb-none, pb-mirror
(mirror.copies 2) and pb-ec (2+1, objsize_limit 0: every object sliced). Each round runs ft-loader PUTs
of 1 MiB objects through the proxy: mirror, none, ec, none (A/B pairs, A the protected bucket, B the
unprotected one). After each pair both buckets are destroyed and created again, so the disks do not
fill up; the harness then waits until every target holds the new bucket metadata and has deleted the
retired trees ("rm.*" in <mountpath>/.work), so that neither the metadata push nor the deletion shares
the cores with the next run.

Goals (issue 16): mirror 2 >= 0.8x and EC 2+1 >= 0.5x of no redundancy. What the redundancy costs:
every byte written twice and one more file per object for mirror 2; for EC 2+1 the slicing, 1.5 times
the bytes sent to three other targets, written and checksummed there, and three more files per object.
On a loaded machine the runs are bound by CPU, so each row also notes the targets' CPU per PUT
(user + system time of the 4 target processes over each run, /proc/<pid>/stat; median over rounds,
A and B): the ratio of those is the cost the throughput ratio follows, with less noise.

OWNERSHIP
bench_protect owns its cluster (under <workdir>/protect): it is stopped before returning, whatever
happens (errors, SIGTERM through SystemExit, Ctrl-C).
"""
import http.client
import json
import os
import statistics
import time

import loadgen
import report
import sysprobe

PUT_SIZE = 1 << 20
TARGETS, MOUNTPATHS = 4, 2
BUCKETS = {"none": {}, "mirror": {"mirror": {"copies": 2}},
           "ec": {"ec": {"data_slices": 2, "parity_slices": 1, "objsize_limit": 0}}}
KINDS = [("mirror", "mirror 2", "Data protection: PUT 1 MiB, mirror 2"),
         ("ec", "EC 2+1", "Data protection: PUT 1 MiB, EC 2+1")]
GOALS = {"mirror": 0.8, "ec": 0.5}   # A/B rate ratio, issue 16
# Where the redundancy of an object of bucket B lives on a mountpath, and how many files per object
# (docs/data-protection.md): one extra copy under .copies/ for mirror 2 (two mountpaths per target),
# D+P = 3 slices under .ec/ (on targets other than the owner) for EC 2+1.
EXTRA = {"mirror": (".copies", 1), "ec": (".ec", 3)}
B_NAME = "no redundancy"
SETTLE_LIMIT = 60.0   # seconds to wait for the BMD push and the deletion of retired trees


class ProtectError(Exception):
    """The protection cluster cannot be driven; the message says why."""


def _log(msg):
    print(msg, flush=True)


def _call(url, method, path, body=None):
    """One request to url (http://host:port); returns (status, body bytes)."""
    host = url.split("//", 1)[1]
    c = http.client.HTTPConnection(host, timeout=60)
    try:
        c.request(method, path, body=json.dumps(body).encode() if body is not None else None,
                  headers={"Content-Type": "application/json"} if body is not None else {})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def _json_call(url, method, path, body=None):
    st, data = _call(url, method, path, body)
    if st != 200:
        raise ProtectError("%s %s%s: %d %r" % (method, url, path, st, data[:200]))
    try:
        return json.loads(data)
    except ValueError:
        raise ProtectError("%s %s%s: not JSON: %r" % (method, url, path, data[:200])) from None


def _bucket(name):
    return "pb-" + name


def _recreate(cl, name):
    """Destroys (if there) and creates bucket pb-<name> with its protection properties."""
    st, data = _call(cl.url, "DELETE", "/v1/buckets/" + _bucket(name))
    if st not in (200, 404):
        raise ProtectError("destroy bucket %s: %d %r" % (_bucket(name), st, data[:200]))
    st, data = _call(cl.url, "POST", "/v1/buckets/" + _bucket(name),
                     {"action": "create-bck", "value": BUCKETS[name]})
    if st != 200:
        raise ProtectError("create bucket %s with %s: %d %r" % (_bucket(name), json.dumps(BUCKETS[name]),
                                                                 st, data[:200]))


def _check_props(cl, name):
    """The proxy's HEAD shows the bucket's protection as asked (a silently ignored value would make the
    row compare two unprotected buckets)."""
    host = cl.url.split("//", 1)[1]
    c = http.client.HTTPConnection(host, timeout=30)
    try:
        c.request("HEAD", "/v1/buckets/" + _bucket(name))
        r = c.getresponse()
        r.read()
        raw = r.getheader("Ais-Bucket-Props")
    finally:
        c.close()
    try:
        props = json.loads(raw or "")
    except ValueError:
        raise ProtectError("HEAD %s: no Ais-Bucket-Props JSON (%d)" % (_bucket(name), r.status)) from None
    for key, want in BUCKETS[name].items():
        got = props.get(key) or {}
        if any(got.get(k) != v for k, v in want.items()):
            raise ProtectError("bucket %s has %s %s, asked for %s" % (_bucket(name), key,
                                                                     json.dumps(got), json.dumps(want)))


def _settle(cl):
    """Waits until every target holds the proxy's BMD and no target deletes a retired tree."""
    want = _json_call(cl.url, "GET", "/v1/cluster?what=bmd").get("version", 0)
    deadline = time.monotonic() + SETTLE_LIMIT
    while True:
        lag = [t.name for t in cl.targets
               if _json_call(t.control_url, "POST", "/v1/metasync", {}).get("bmd_version", -1) < want]
        busy = []
        for t in cl.targets:
            for mp in t.mountpaths:
                try:
                    if any(n.startswith("rm.") for n in os.listdir(os.path.join(mp, ".work"))):
                        busy.append(mp)
                except OSError:
                    pass
        if not lag and not busy:
            return
        if time.monotonic() >= deadline:
            raise ProtectError("after %.0f s: targets %s below bucket metadata v%d, retired trees left "
                               "on %s" % (SETTLE_LIMIT, lag, want, busy))
        time.sleep(0.05)


def _files(cl, top, bucket):
    """Files under <mountpath>/<top>/ais/<bucket> on every mountpath of every target."""
    n = 0
    for t in cl.targets:
        for mp in t.mountpaths:
            for _root, _dirs, files in os.walk(os.path.join(mp, top, "ais", bucket)):
                n += len(files)
    return n


def _redundancy_check(kind, seen):
    """None when every A run of kind left the redundancy its acknowledged PUTs promise, else why not.
    seen: (acknowledged PUTs, objects, redundancy files) per A run without errors."""
    top, per = EXTRA[kind]
    for acked, objects, extra in seen:
        if objects < acked or extra < per * acked:
            return ("after a run of %d acknowledged PUTs the mountpaths held %d objects and %d files under "
                    "%s/ (want at least %d): the bucket did not store the redundancy it was created with"
                    % (acked, objects, extra, top, per * acked))
    return None


def _rows_skipped(b, why, desc):
    for kind, a_name, title in KINDS:
        b.rows.append(report.Row(title, desc, a_name, B_NAME, "rps", GOALS[kind], skipped=why))


def _cpu_measured(cl, into, run):
    """run() (one ft-loader run); appends the targets' CPU milliseconds per PUT to into when it had
    no errors. Returns run()'s result."""
    pids = [t.pid for t in cl.targets]
    t0 = sysprobe.proc_cpu_seconds(pids)
    r = run()
    t1 = sysprobe.proc_cpu_seconds(pids)
    if r.requests and not r.errors:
        into.append(1000.0 * (t1 - t0) / r.requests)
    return r


def _cpu_note(cpu):
    """The row's CPU evidence (medians over its runs), or None without figures for both sides."""
    if not cpu["A"] or not cpu["B"]:
        return None
    a, b = statistics.median(cpu["A"]), statistics.median(cpu["B"])
    return ("Targets' CPU per PUT (median over rounds): %.2f ms protected, %.2f ms without redundancy: "
            "%.2fx the cost (inverse %.2fx, what the rate ratio tends to where the targets' CPU is the "
            "bottleneck)." % (a, b, a / b, b / a))


def bench_protect(b, ftcluster):
    """Adds the rows "Data protection: PUT 1 MiB, mirror 2" and "..., EC 2+1" (A = the protected
    bucket, B = the same PUTs into a bucket without redundancy) to b.rows."""
    a = b.args
    desc = ("ft-loader -pctput 100 -numworkers %d, 1 MiB objects through the proxy; 1 proxy + %d targets "
            "x %d mountpaths, buckets re-created after each pair" % (a.conns, TARGETS, MOUNTPATHS))
    if b.loader is None:
        _rows_skipped(b, b.skip_reason("ft-loader"), desc)
        return
    cl = None
    pairs = {kind: [] for kind, _, _ in KINDS}
    seen = {kind: [] for kind, _, _ in KINDS}
    cpu = {kind: {"A": [], "B": []} for kind, _, _ in KINDS}   # targets' CPU ms per PUT, per run
    why = None
    try:
        base = b.pick_ports(2 + 2 * TARGETS)
        cl = ftcluster.Cluster(os.path.join(b.workdir, "protect"), base, targets=TARGETS,
                               mountpaths=MOUNTPATHS, bindir=b.bindir)
        cl.start()
        _log("[%s] protect: cluster up: proxy %s, %d targets x %d mountpaths"
             % (b.elapsed(), cl.url, TARGETS, MOUNTPATHS))
        for name in BUCKETS:
            _recreate(cl, name)
            _check_props(cl, name)
        _settle(cl)

        def put(name, into=None):
            """The PUT run into pb-<name>; with into, it also appends the targets' CPU per PUT there."""
            def run():
                return b.loader.run_put_native(cl.port, _bucket(name), PUT_SIZE, a.seconds, a.conns,
                                               log=b.runlog)
            return run if into is None else (lambda: _cpu_measured(cl, into, run))

        def put_checked(kind):
            """A: the PUTs into the protected bucket, then the count of its objects and of their
            redundancy files (an acknowledged PUT has all of them)."""
            def run():
                r = put(kind, cpu[kind]["A"])()
                if not r.errors:
                    seen[kind].append((r.requests, _files(cl, "", _bucket(kind)),
                                       _files(cl, EXTRA[kind][0], _bucket(kind))))
                    _log("[%s] protect: %s: %d PUTs acknowledged, %d objects, %d files under %s/"
                         % ((b.elapsed(), kind) + seen[kind][-1] + (EXTRA[kind][0],)))
                return r
            return run

        for rnd in range(a.rounds):
            for kind, a_name, _ in KINDS:
                pairs[kind].append(b.pair("protect", a_name, "ft-loader", rnd, put_checked(kind),
                                          put("none", cpu[kind]["B"]), "rps"))
                _log("[%s] protect: %s: targets' CPU per PUT: A %s ms, B %s ms"
                     % (b.elapsed(), kind, "%.2f" % cpu[kind]["A"][-1] if cpu[kind]["A"] else "-",
                        "%.2f" % cpu[kind]["B"][-1] if cpu[kind]["B"] else "-"))
                _recreate(cl, kind)
                _recreate(cl, "none")
                _settle(cl)
    except (OSError, http.client.HTTPException, ProtectError, loadgen.LoadError,
            ftcluster.ClusterError, b.Error) as e:
        why = "the %d-target cluster failed: %s" % (TARGETS, str(e).splitlines()[0])
        _log("bench: protect: %s" % why)
    finally:
        if cl is not None:
            bad = {k: v for k, v in cl.stop().items() if v != 0}
            if bad:
                _log("bench: protect: unclean exits of cluster nodes: %s (logs in %s/logs)" % (bad, cl.dir))
    for kind, a_name, title in KINDS:
        row = report.Row(title, desc, a_name, B_NAME, "rps", GOALS[kind], pairs=pairs[kind])
        row.notes = _cpu_note(cpu[kind])
        if why and not row.good_pairs():
            row.skipped = why
        elif why:
            row.failed = "stopped after %d of %d rounds: %s" % (len(pairs[kind]), a.rounds, why)
        else:
            row.failed = _redundancy_check(kind, seen[kind])
        b.rows.append(row)
