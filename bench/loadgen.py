# SPDX-License-Identifier: Apache-2.0
# Load clients of the bench: runs wrk (with bench/wrk-*.lua) or ft-loader for a fixed time and parses what they report.
"""
Every run returns a Result with the request count, the measured seconds and the error count. Payload
throughput is requests x object size (not the client's byte count, which includes response headers:
the target's Ais-* headers would otherwise inflate its small-object figures by about 1%).

A run with errors is not a measurement: the harness reports it as failed instead of using its figure.
"""

import json
import os
import re
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
WRK = "/usr/bin/wrk"


class LoadError(Exception):
    """A client could not run or its output could not be read."""


class Result:
    def __init__(self, client, requests, seconds, errors, object_size, detail=""):
        self.client = client
        self.requests = requests
        self.seconds = seconds
        self.errors = errors
        self.object_size = object_size
        self.detail = detail           # the client's error breakdown, for failure messages

    @property
    def rps(self):
        return self.requests / self.seconds if self.seconds > 0 else 0.0

    @property
    def bps(self):
        """Payload bytes per second."""
        return self.rps * self.object_size

    def to_json(self):
        return {"client": self.client, "requests": self.requests, "seconds": self.seconds,
                "errors": self.errors, "object_size": self.object_size, "rps": self.rps,
                "bps": self.bps, "detail": self.detail}


def run_wrk(base_url, paths_file, object_size, seconds, conns, threads, method="GET",
            timeout_s=10, log=None):
    """wrk against base_url, rotating over the paths in paths_file (GET, or PUT of object_size bytes)."""
    if method == "GET":
        script, extra = os.path.join(HERE, "wrk-urls.lua"), [paths_file]
    elif method == "PUT":
        script, extra = os.path.join(HERE, "wrk-put.lua"), [paths_file, str(object_size)]
    else:
        raise LoadError("wrk: unsupported method %s" % method)
    argv = [WRK, "-t", str(threads), "-c", str(conns), "-d", "%ds" % seconds,
            "--timeout", "%ds" % timeout_s, "-s", script, base_url, "--"] + extra
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60)
    except subprocess.TimeoutExpired:
        raise LoadError("wrk did not finish: %s" % " ".join(argv)) from None
    if log is not None:
        log.write("$ %s\n%s%s\n" % (" ".join(argv), p.stdout, p.stderr))
    m = re.search(r"^WRK_JSON (\{.*\})$", p.stdout, re.M)
    if p.returncode != 0 or m is None:
        raise LoadError("wrk failed (exit %d): %s\n%s%s" % (p.returncode, " ".join(argv),
                                                            p.stdout[-2000:], p.stderr[-2000:]))
    j = json.loads(m.group(1))
    errors = j["connect"] + j["read"] + j["write"] + j["status"] + j["timeout"]
    detail = "connect %d read %d write %d status %d timeout %d" % (
        j["connect"], j["read"], j["write"], j["status"], j["timeout"])
    res = Result("wrk", j["requests"], j["duration_us"] / 1e6, errors, object_size, detail)
    res.p99_us = j.get("lat_p99_us")  # wrk's latency percentile, for the rows about latency
    return res


def find_loader(bindir):
    """The ft-loader of the build, or None when it is not built."""
    path = os.path.join(bindir, "ft-loader")
    if not os.access(path, os.X_OK):
        return None
    return Loader(path)


class Loader:
    """ft-loader with the aisloader-style flags of issue 5; reads the -json summary (last stdout line)."""

    def __init__(self, path):
        self.path = path

    def _run(self, flags, op, object_size, seconds, workers, log, env=None):
        """seconds = 0: no time limit (flags carry what ends the run, e.g. -epochs). op: the summary row read
        (GETBATCH: its items are the requests)."""
        argv = [self.path, "-duration", "%ds" % seconds, "-numworkers", str(workers),
                "-statsinterval", "0", "-quiet", "-json"] + flags
        if op == "PUT":
            size = "%dB" % object_size if object_size % 1024 else "%dKiB" % (object_size // 1024)
            argv += ["-pctput", "100", "-minsize", size, "-maxsize", size]
        else:
            argv += ["-pctput", "0"]
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=(seconds or 60) + 60,
                               env=dict(os.environ, **env) if env else None)
        except subprocess.TimeoutExpired:
            raise LoadError("ft-loader did not finish: %s" % " ".join(argv)) from None
        if log is not None:
            log.write("$ %s\n%s%s\n" % (" ".join(argv), p.stdout[-4000:], p.stderr[-4000:]))
        # Exit 1 = some request failed: the summary still counts them, and the run is then
        # reported as failed by the harness through the error count.
        if p.returncode not in (0, 1):
            raise LoadError("ft-loader failed (exit %d): %s\n%s" % (p.returncode, " ".join(argv),
                                                                    p.stderr[-2000:]))
        return parse_loader_json(p.stdout, op, object_size, argv)

    def run_once_batch(self, proxy_port, bucket, names_file, object_size, batch_size, workers, direct=True,
                       log=None, sched=None, epochs=1):
        """Every object once (-epochs 1 -uniquegets; epochs: that many passes) through GetBatch, batch_size
        objects a POST /v1/batch (-get-batchsize), straight to the target owning most of each batch (direct) or
        through the proxy's 307; no time limit. The Result's requests are the objects delivered (the GETBATCH
        row's items), its errors the failed batches. sched: as run_once_direct's."""
        return self._run(["-ip", "127.0.0.1", "-port", str(proxy_port), "-bucket", bucket,
                          "-filelist", names_file, "-epochs", str(epochs), "-uniquegets",
                          "-get-batchsize", str(batch_size)] + (["-direct"] if direct else []) + _sched_flag(sched),
                         "GETBATCH", object_size, 0, workers, log)

    def run_direct(self, proxy_port, bucket, names_file, object_size, seconds, workers, log=None):
        """GETs over the names, straight to the owning targets (-direct)."""
        return self._run(["-ip", "127.0.0.1", "-port", str(proxy_port), "-bucket", bucket,
                          "-direct", "-filelist", names_file], "GET", object_size, seconds,
                         workers, log)

    def run_native(self, proxy_port, bucket, names_file, object_size, seconds, workers, log=None):
        """GETs over the names through the proxy (following its redirect)."""
        return self._run(["-ip", "127.0.0.1", "-port", str(proxy_port), "-bucket", bucket,
                          "-filelist", names_file], "GET", object_size, seconds, workers, log)

    def run_put_native(self, proxy_port, bucket, object_size, seconds, workers, log=None):
        """PUTs of object_size bytes through the proxy (following its redirect), names of ft-loader's own."""
        return self._run(["-ip", "127.0.0.1", "-port", str(proxy_port), "-bucket", bucket], "PUT", object_size,
                         seconds, workers, log)

    def run_url_list(self, urls_file, object_size, seconds, workers, op="GET", log=None):
        """Plain HTTP GETs (or PUTs of object_size bytes) of the URLs in urls_file."""
        return self._run(["-url-list", urls_file], op, object_size, seconds, workers, log)

    def run_once_direct(self, proxy_port, bucket, names_file, object_size, workers,
                        provider="ais", log=None, sched=None, epochs=1):
        """Every object once (-epochs 1 -uniquegets; epochs: that many passes), straight to the owners; no
        time limit. sched: ft-loader's -sched (None: its default)."""
        return self._run(["-ip", "127.0.0.1", "-port", str(proxy_port), "-bucket", bucket,
                          "-provider", provider, "-direct", "-filelist", names_file,
                          "-epochs", str(epochs), "-uniquegets"] + _sched_flag(sched), "GET", object_size, 0,
                         workers, log)

    def run_once_url_list(self, urls_file, object_size, workers, log=None, sched=None):
        """Every URL once (-epochs 1 -uniquegets); no time limit. sched: as run_once_direct's."""
        return self._run(["-url-list", urls_file, "-epochs", "1", "-uniquegets"] + _sched_flag(sched),
                         "GET", object_size, 0, workers, log)

    def run_s3(self, endpoint, keys, bucket, names_file, object_size, seconds, workers, log=None):
        """GETs over the names through the S3 API (SigV4 with keys = (access key, secret))."""
        env = {"AWS_ACCESS_KEY_ID": keys[0], "AWS_SECRET_ACCESS_KEY": keys[1],
               "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}
        return self._run(["-s3endpoint", endpoint, "-s3-use-path-style", "-bucket", bucket,
                          "-filelist", names_file], "GET", object_size, seconds, workers, log, env)


def _sched_flag(sched):
    return ["-sched", sched] if sched else []


def parse_loader_json(stdout, op, object_size, argv):
    """The totals of op in ft-loader's -json document (the last line of stdout); for GETBATCH the requests are
    the items (objects) the batches delivered, the errors the failed batches."""
    lines = stdout.strip().splitlines()
    try:
        doc = json.loads(lines[-1]) if lines else None
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        raise LoadError("ft-loader printed no JSON document last: %s\n%s"
                        % (" ".join(argv), stdout[-1000:]))
    for entry in doc.get("summary") or []:
        if entry.get("op") == op:
            try:
                count, errors, seconds = int(entry["count"]), int(entry["errors"]), float(entry["seconds"])
                if op == "GETBATCH":
                    count = int(entry["items"])
            except (KeyError, TypeError, ValueError):
                break
            return Result("ft-loader", count, seconds, errors, object_size,
                          "ft-loader counted %d failed %s" % (errors, "batches" if op == "GETBATCH" else "requests"))
    raise LoadError("ft-loader's JSON summary has no %s totals: %s" % (op, json.dumps(doc)[:600]))
