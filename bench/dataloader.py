# SPDX-License-Identifier: Apache-2.0
# `make bench` rows of a PyTorch DataLoader reading samples with boto3 through FastTier's S3 vs from local files.
"""
DESIGN
Issue 16 item 5: the card's main user is a PyTorch DataLoader doing S3 GETs. These rows run one on a
cluster of their own (1 proxy + 1 target x 1 mountpath, the unit the other rows compare) over SETS:
10,000 samples of 16 KiB and 2,000 of 128 KiB (2,000 and 400 with --quick), one object per sample, PUT
through the proxy into one bucket per size. Sample i starts with i (8 bytes, little-endian).

A: a map-style torch Dataset whose __getitem__ is boto3's get_object(bucket, key)["Body"].read() on the
   proxy's S3 endpoint (<proxy>/s3, path style, the cluster's S3 key pair: the proxy verifies SigV4
   and relays the body from the target). boto3 and botocore are Debian's, imported by the main
   process as a training script does; each worker process makes its own client on first use (a boto3
   client must not cross a fork), with default settings but one attempt (a retry would hide a failure).
B: the same Dataset reading the same objects as local files: open(path).read() of the very files the
   target stores (<mountpath>/ais/<bucket>/<key>: same inodes, same page cache).
Both through torch.utils.data.DataLoader(num_workers=WORKERS, batch_size=BATCH, shuffle=True with a
generator seeded by the round, so both sides read the same order; the collate function keeps the
batch a list of bytes), one epoch per run, worker start included on both sides, every sample's size
and leading index checked in the main process. Samples per second of wall time; no target ratio (it
says what share of a training step the storage path costs, issue 16 item 5). The notes give the CPU
per sample of the proxy + target (/proc/<pid>/stat) and of the DataLoader (rusage of the main process
and of its joined workers) on each side.

OWNERSHIP
bench_dataloader owns its cluster (under <workdir>/dataloader): stopped before it returns, whatever
happens.
"""
import http.client
import os
import resource
import statistics
import time
import warnings

import copybck
import loadgen
import report
import sysprobe

WORKERS, BATCH = 4, 32
# (label, sample size, samples, samples with --quick)
SETS = [("16 KiB", 16 * 1024, 10000, 2000), ("128 KiB", 128 * 1024, 2000, 400)]
A_NAME, B_NAME = "boto3 via FastTier S3", "local files"


def _title(label):
    return "PyTorch DataLoader S3 GET %s samples" % label


def _bucket(label):
    return "bench-dls3-%s" % label.replace(" ", "").lower()


def _names(n):
    return ["s/%06d" % i for i in range(n)]


def _collate(batch):
    return batch


def _datasets(torch_data, boto3, config, endpoint, keys, bucket, names, files):
    """(S3 dataset, files dataset) over the same samples."""

    class S3Samples(torch_data.Dataset):
        """Sample i = object names[i] of bucket, by boto3 GetObject through the endpoint."""

        def __init__(self):
            self.pid, self.s3 = None, None

        def __len__(self):
            return len(names)

        def __getitem__(self, i):
            if self.pid != os.getpid():  # a client per worker process, made after the fork
                self.s3 = boto3.session.Session().client(
                    "s3", endpoint_url=endpoint, aws_access_key_id=keys[0], aws_secret_access_key=keys[1],
                    region_name="us-east-1", config=config(retries={"max_attempts": 1, "mode": "standard"}))
                self.pid = os.getpid()
            return self.s3.get_object(Bucket=bucket, Key=names[i])["Body"].read()

    class FileSamples(torch_data.Dataset):
        """Sample i = the file files[i]."""

        def __len__(self):
            return len(files)

        def __getitem__(self, i):
            with open(files[i], "rb") as f:
                return f.read()

    return S3Samples(), FileSamples()


def _cpu_self_children():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def _epoch(torch, ds, size, seed, what, cpu=None, pids=()):
    """One epoch of ds through a DataLoader: a loadgen.Result (samples per second of wall time). cpu: a
    list to append (CPU seconds of pids, of this process and its workers) to."""
    n = bad = 0
    c0, p0 = _cpu_self_children(), sysprobe.proc_cpu_seconds(pids)
    seen = bytearray(len(ds))
    with warnings.catch_warnings():  # "4 workers on 2 CPUs": the row's setting, said in its description
        warnings.simplefilter("ignore", UserWarning)
        t0 = time.monotonic()
        loader = torch.utils.data.DataLoader(ds, batch_size=BATCH, shuffle=True, num_workers=WORKERS,
                                             collate_fn=_collate,
                                             generator=torch.Generator().manual_seed(seed))
        for batch in loader:
            for s in batch:
                n += 1
                i = int.from_bytes(s[:8], "little")
                if len(s) != size or i >= len(seen) or seen[i]:
                    bad += 1
                else:
                    seen[i] = 1
        seconds = time.monotonic() - t0
        del loader  # its workers are joined: their CPU is in RUSAGE_CHILDREN
    if cpu is not None and n:
        cpu.append(((sysprobe.proc_cpu_seconds(pids) - p0) / n, (_cpu_self_children() - c0) / n))
    return loadgen.Result(what, n, seconds, bad + abs(len(ds) - n), size,
                          detail="%d samples of %d, %d of a wrong size, index or repeated" % (n, len(ds), bad))


def _cpu_note(a, b):
    """CPU per sample of each side (medians over runs), or None without figures for both."""
    if not a or not b:
        return None
    med = [[statistics.median(x[i] for x in side) * 1e3 for i in (0, 1)] for side in (a, b)]
    return ("CPU ms per sample (medians of %d/%d runs): through S3 proxy + target %.3f, DataLoader (main "
            "process and its %d workers, rusage) %.3f; local files: DataLoader %.3f (proxy + target %.3f, idle)"
            % (len(a), len(b), med[0][0], WORKERS, med[0][1], med[1][1], med[1][0]))


def _skip_all(b, why, desc):
    for label, _, _, _ in SETS:
        b.rows.append(report.Row(_title(label), desc, A_NAME, B_NAME, "rps", None, skipped=why))


def bench_dataloader(b, ftcluster):
    """Appends one row per sample size (A = boto3 through the proxy's S3, B = local files) to b.rows."""
    a = b.args
    desc = ("torch DataLoader, %d workers, batch %d, shuffle, 1 epoch: boto3 get_object via <proxy>/s3 (A) vs "
            "open().read() of the same object files (B); 1 proxy + 1 target" % (WORKERS, BATCH))
    try:
        import boto3  # here, as a training script does: the forked workers inherit it
        import torch
        import torch.utils.data as torch_data
        from botocore.config import Config
    except ImportError as e:
        _skip_all(b, "torch or boto3 cannot be imported: %s" % e, desc)
        return
    cl, why = None, None
    pairs = {label: [] for label, _, _, _ in SETS}
    cpu = {(label, side): [] for label, _, _, _ in SETS for side in "AB"}
    loaded = {}
    try:
        base = b.pick_ports(4)
        cl = ftcluster.Cluster(os.path.join(b.workdir, "dataloader"), base, targets=1, mountpaths=1,
                               bindir=b.bindir)
        cl.start()
        keys = cl.s3_keys()
        mp = cl.targets[0].mountpaths[0]
        t0 = time.monotonic()
        for label, size, full, quick in SETS:
            names = _names(quick if a.quick else full)
            copybck.put_objects(cl.url, _bucket(label), names, size)
            files = [os.path.join(mp, "ais", _bucket(label), n) for n in names]
            missing = [f for f in files if not os.path.isfile(f)]
            if missing:
                raise copybck.CopyError("%d object files not where the target stores them, e.g. %s"
                                        % (len(missing), missing[0]))
            loaded[label] = (size,) + _datasets(torch_data, boto3, Config, cl.url + "/s3", keys, _bucket(label),
                                                names, files)
        pids = [cl.proxy.pid, cl.targets[0].pid]
        print("[%s] dataloader: cluster up (%s), %s loaded in %.1f s"
              % (b.elapsed(), cl.url, ", ".join("%d x %s" % (len(v[1]), k) for k, v in loaded.items()),
                 time.monotonic() - t0), flush=True)
        for rnd in range(a.rounds):
            for label, (size, s3ds, fds) in loaded.items():
                pairs[label].append(b.pair("DataLoader", label, "torch", rnd,
                                           lambda: _epoch(torch, s3ds, size, rnd, A_NAME, cpu[label, "A"], pids),
                                           lambda: _epoch(torch, fds, size, rnd, B_NAME, cpu[label, "B"], pids),
                                           "rps"))
    except (OSError, ValueError, http.client.HTTPException, copybck.CopyError, ftcluster.ClusterError,
            b.Error) as e:
        why = "the DataLoader cluster failed: %s" % str(e).splitlines()[0]
        print("bench: dataloader: %s" % why, flush=True)
    finally:
        if cl is not None:
            bad = {k: v for k, v in cl.stop().items() if v != 0}
            if bad:
                print("bench: dataloader: unclean exits of cluster nodes: %s (logs in %s/logs)" % (bad, cl.dir),
                      flush=True)
    for label, _, _, _ in SETS:
        n = len(loaded[label][1]) if label in loaded else 0
        row = report.Row(_title(label), desc + ", %d samples" % n, A_NAME, B_NAME, "rps", None,
                         pairs=pairs[label])
        if why and not row.good_pairs():
            row.skipped = why
        elif why:
            row.failed = "stopped after %d of %d rounds: %s" % (len(pairs[label]), a.rounds, why)
        row.notes = _cpu_note(cpu[label, "A"], cpu[label, "B"])
        b.rows.append(row)
