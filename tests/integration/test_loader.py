# SPDX-License-Identifier: Apache-2.0
# ft-loader against a real cluster and a tiny HTTP server: counts, -verifyhash, exact stops, JSON, cleanup, -url-list.
import collections
import http.server
import io
import json
import os
import signal
import subprocess
import tarfile
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

from ftutil import unique

ROOT = Path(__file__).resolve().parents[2]
FT_BIN = os.environ.get("FT_BIN") or str(ROOT / "build" / "bin")
LOADER = os.path.join(FT_BIN, "ft-loader")
RUN_TIMEOUT = 120


@pytest.fixture(scope="module", autouse=True)
def loader_binary():
    if not os.access(LOADER, os.X_OK):
        pytest.fail("ft-loader is not built: %s is missing (build it first)" % LOADER, pytrace=False)


def proxy_args(cluster):
    u = urllib.parse.urlsplit(cluster.url)
    return ["-ip", u.hostname, "-port", str(u.port)]


class Result:
    def __init__(self, proc, out, err, js, wall):
        self.rc = proc.returncode
        self.out = out
        self.err = err
        self.json = js
        self.wall = wall

    def summary(self, op):
        rows = [r for r in self.json["summary"] if r["op"] == op]
        assert len(rows) <= 1, rows
        return rows[0] if rows else {"count": 0, "bytes": 0, "errors": 0}

    def __repr__(self):
        return "rc=%s\nstdout:\n%s\nstderr:\n%s" % (self.rc, self.out[-3000:], self.err[-3000:])


def run_loader(tmp_path, args, timeout=RUN_TIMEOUT, env=None):
    """Runs ft-loader to completion with -json (env: its environment, default ours); returns a Result (json None
    if not written)."""
    js_path = tmp_path / ("out-%s.json" % unique("l"))
    cmd = [LOADER] + list(args) + ["-json", str(js_path)]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    wall = time.monotonic() - t0
    js = json.loads(js_path.read_text()) if js_path.exists() else None
    return Result(p, p.stdout, p.stderr, js, wall)


def check_json_adds_up(res):
    """Per-interval rows sum to the summary, per op; fields are consistent."""
    j = res.json
    assert j is not None, res
    assert j["version"] == 1
    for row in j["summary"]:
        op = row["op"]
        iv = [r for r in j["intervals"] if r["op"] == op]
        for key in ("count", "bytes", "errors") + (("items",) if op == "GETBATCH" else ()):
            assert sum(r[key] for r in iv) == row[key], "%s %s: intervals %r vs summary %r" % (
                op, key, [r[key] for r in iv], row[key])
        lat = row["latency_us"]
        if row["count"] > 0:
            assert 0 < lat["min"] <= lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p99.9"] <= lat["max"]
            assert lat["min"] <= lat["avg"] <= lat["max"]
    assert j["errors"] == sum(r["errors"] for r in j["summary"])


def listed(api, bucket):
    entries, _ = api.list_all(bucket)
    return {e["name"]: e["size"] for e in entries}


@pytest.fixture
def bucket(api):
    b = unique("ld")
    api.create_bucket(b)
    yield b
    api.destroy_bucket(b, expect=None)


def test_help_documents_every_flag():
    p = subprocess.run([LOADER, "-help"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0
    for flag in ("ip", "port", "bucket", "provider", "duration", "numworkers", "pctput", "minsize", "maxsize",
                 "totalputsize", "maxputs", "cleanup", "epochs", "uniquegets", "readoff", "readlen",
                 "verifyhash", "statsinterval", "json", "seed", "filelist", "loaderid", "loadernum",
                 "s3endpoint", "s3-use-path-style", "url-list", "direct", "sched", "https", "cacert"):
        assert ("  -%s\n" % flag in p.stdout) or ("  -%s " % flag in p.stdout), flag
    bad = subprocess.run([LOADER, "-bucket", "x", "-nosuchflag"], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "nosuchflag" in bad.stderr
    bad = subprocess.run([LOADER, "-bucket", "x", "-minsize", "12parsecs"], capture_output=True, text=True,
                         timeout=30)
    assert bad.returncode == 2 and "minsize" in bad.stderr
    bad = subprocess.run([LOADER, "-bucket", "x", "-sched", "fifo"], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "-sched must be batch or other" in bad.stderr, bad.stderr
    bad = subprocess.run([LOADER, "-bucket", "x", "-ip", "https://127.0.0.1"], capture_output=True, text=True,
                         timeout=30)
    assert bad.returncode == 2 and "-ip HOST -https" in bad.stderr, (bad.returncode, bad.stderr)


def test_maxputs_exact_and_listing_matches(cluster, api, bucket, tmp_path):
    r = run_loader(tmp_path, proxy_args(cluster) + [
        "-bucket", bucket, "-pctput", "100", "-maxputs", "200", "-minsize", "1KiB", "-maxsize", "20KiB",
        "-numworkers", "16", "-loaderid", "w", "-statsinterval", "100ms"])
    assert r.rc == 0, r
    put = r.summary("PUT")
    assert put["count"] == 200 and put["errors"] == 0, r
    assert r.summary("GET")["count"] == 0
    assert r.json["stop_reason"] == "maxputs reached"
    check_json_adds_up(r)
    objs = listed(api, bucket)
    assert sorted(objs) == sorted("w-%d" % i for i in range(1, 201))
    assert sum(objs.values()) == put["bytes"]
    assert all(1024 <= s <= 20 * 1024 for s in objs.values())

    # a second run continues the numbering instead of overwriting
    r = run_loader(tmp_path, proxy_args(cluster) + [
        "-bucket", bucket, "-pctput", "100", "-maxputs", "37", "-minsize", "1KiB", "-maxsize", "1KiB",
        "-numworkers", "7", "-loaderid", "w", "-direct"])
    assert r.rc == 0, r
    assert r.summary("PUT")["count"] == 37
    objs = listed(api, bucket)
    assert len(objs) == 237
    assert sorted(set(objs) - {"w-%d" % i for i in range(1, 201)}) == sorted("w-%d" % i for i in range(201, 238))


def test_totalputsize_stops_after_the_crossing_put(cluster, api, bucket, tmp_path):
    r = run_loader(tmp_path, proxy_args(cluster) + [
        "-bucket", bucket, "-pctput", "100", "-totalputsize", "100KiB", "-minsize", "10KiB", "-maxsize",
        "10KiB", "-numworkers", "4"])
    assert r.rc == 0, r
    assert r.summary("PUT")["count"] == 10
    assert len(listed(api, bucket)) == 10


def put_objects(api, bucket, n, size_fn):
    sizes = {}
    for i in range(n):
        name = "pre/%03d" % i
        data = os.urandom(size_fn(i))
        api.put(bucket, name, data)
        sizes[name] = len(data)
    return sizes


def test_get_counts_with_filelist_and_epochs(cluster, api, bucket, tmp_path):
    sizes = put_objects(api, bucket, 30, lambda i: 1000 + 37 * i)
    names = sorted(sizes)[:20]
    fl = tmp_path / "names.txt"
    fl.write_text("\n".join(names) + "\n")
    r = run_loader(tmp_path, proxy_args(cluster) + [
        "-bucket", bucket, "-filelist", str(fl), "-epochs", "3", "-uniquegets", "-numworkers", "8",
        "-verifyhash"])
    assert r.rc == 0, r
    get = r.summary("GET")
    assert get["count"] == 60 and get["errors"] == 0, r
    # every listed object read exactly once per epoch: the bytes say so (sizes all differ)
    assert get["bytes"] == 3 * sum(sizes[n] for n in names)
    assert r.json["stop_reason"] == "epochs done"
    check_json_adds_up(r)

    # the whole bucket (listed through the proxy, paged), direct to the targets
    r = run_loader(tmp_path, proxy_args(cluster) + [
        "-bucket", bucket, "-epochs", "2", "-numworkers", "5", "-direct", "-verifyhash"])
    assert r.rc == 0, r
    assert r.json["objects_listed"] == 30
    assert r.summary("GET")["count"] == 60
    assert r.summary("GET")["bytes"] == 2 * sum(sizes.values())

    # a name the cluster does not have: one error per epoch, exit status 1
    fl.write_text("\n".join(names[:4] + ["pre/missing"]) + "\n")
    r = run_loader(tmp_path, proxy_args(cluster) + [
        "-bucket", bucket, "-filelist", str(fl), "-epochs", "2", "-numworkers", "3"])
    assert r.rc == 1, r
    assert r.summary("GET")["count"] == 10
    assert r.summary("GET")["errors"] == 2
    assert "pre/missing" in r.err and "404" in r.err


def test_range_reads(cluster, api, bucket, tmp_path):
    put_objects(api, bucket, 5, lambda i: 5000)
    r = run_loader(tmp_path, proxy_args(cluster) + [
        "-bucket", bucket, "-epochs", "4", "-readoff", "100", "-readlen", "1KiB", "-numworkers", "4"])
    assert r.rc == 0, r
    assert r.summary("GET")["count"] == 20
    assert r.summary("GET")["bytes"] == 20 * 1024


def test_verifyhash_catches_a_corrupted_object(cluster, api, bucket, tmp_path):
    cluster.require_local("flips bytes in an object file on a target's mountpath")
    put_objects(api, bucket, 10, lambda i: 64 * 1024)
    victim = "pre/004"
    paths = [os.path.join(mp, "ais", bucket, victim) for mp in cluster.all_mountpaths()]
    paths = [p for p in paths if os.path.exists(p)]
    assert len(paths) == 1, paths
    with open(paths[0], "r+b") as f:  # same size, so the stored metadata (old checksum) still matches it
        f.seek(1000)
        b = f.read(4)
        f.seek(1000)
        f.write(bytes(x ^ 0xFF for x in b))

    r = run_loader(tmp_path, proxy_args(cluster) + [
        "-bucket", bucket, "-epochs", "2", "-uniquegets", "-verifyhash", "-numworkers", "4"])
    assert r.rc == 1, r
    get = r.summary("GET")
    assert get["count"] == 20 and get["errors"] == 2, r
    assert victim in r.err and "hash" in r.err
    assert r.json["errors"] == 2

    # without -verifyhash the same bytes go unnoticed: the check is the loader's own
    r = run_loader(tmp_path, proxy_args(cluster) + ["-bucket", bucket, "-epochs", "1", "-numworkers", "4"])
    assert r.rc == 0, r
    assert r.summary("GET")["errors"] == 0


@pytest.mark.parametrize("kind", ["md5", "xxh3", "crc32c", "sha256", "sha512"])
def test_verifyhash_of_each_bucket_type(cluster, api, tmp_path, kind):
    """-verifyhash checks a GET body against Ais-Checksum-Value of every bucket type: the clean objects pass, a
    flipped byte (same size, stored value unchanged) is an error."""
    cluster.require_local("flips a byte in an object file on a target's mountpath")
    b = unique("ld" + kind)
    api.create_bucket(b, cksum=kind)
    put_objects(api, b, 6, lambda i: 5000 + 999 * i)
    r = run_loader(tmp_path, proxy_args(cluster) + ["-bucket", b, "-epochs", "1", "-uniquegets", "-verifyhash",
                                                    "-numworkers", "3"])
    assert r.rc == 0 and r.summary("GET")["count"] == 6 and r.summary("GET")["errors"] == 0, r
    victim = "pre/002"
    paths = [p for p in (os.path.join(mp, "ais", b, victim) for mp in cluster.all_mountpaths()) if os.path.exists(p)]
    assert len(paths) == 1, paths
    with open(paths[0], "r+b") as f:
        f.seek(77)
        c = f.read(1)
        f.seek(77)
        f.write(bytes([c[0] ^ 0x01]))
    r = run_loader(tmp_path, proxy_args(cluster) + ["-bucket", b, "-epochs", "1", "-uniquegets", "-verifyhash",
                                                    "-numworkers", "3"])
    assert r.rc == 1 and r.summary("GET")["errors"] == 1, r
    assert victim in r.err and "Ais-Checksum-Value" in r.err, r.err
    api.destroy_bucket(b)


def test_verifyhash_against_hashes_recorded_at_put(cluster, api, bucket, tmp_path):
    r = run_loader(tmp_path, proxy_args(cluster) + [
        "-bucket", bucket, "-pctput", "40", "-minsize", "1KiB", "-maxsize", "64KiB", "-maxputs", "150",
        "-verifyhash", "-numworkers", "8", "-direct"])
    assert r.rc == 0, r
    assert r.summary("PUT")["count"] == 150 and r.summary("PUT")["errors"] == 0
    assert r.summary("GET")["errors"] == 0
    assert len(listed(api, bucket)) == 150


def test_duration_stops_in_time(cluster, api, bucket, tmp_path):
    put_objects(api, bucket, 20, lambda i: 4096)
    r = run_loader(tmp_path, proxy_args(cluster) + [
        "-bucket", bucket, "-duration", "2s", "-statsinterval", "500ms", "-numworkers", "8", "-pctput", "10",
        "-minsize", "4KiB", "-maxsize", "4KiB"])
    assert r.rc == 0, r
    ran = r.json["phases"]["run"]["duration_s"]
    assert 2.0 <= ran <= 2.5, ran  # within one stats tick
    assert r.json["stop_reason"] == "duration reached"
    assert r.wall < 10, r.wall
    check_json_adds_up(r)
    # intervals every 500 ms: at least 4 rows of GETs
    assert len([x for x in r.json["intervals"] if x["op"] == "GET"]) >= 4
    # what the loader says it wrote is what the bucket holds
    assert len(listed(api, bucket)) == 20 + r.summary("PUT")["count"] - r.summary("PUT")["errors"]
    assert "Time" in r.out and "P99.9" in r.out and "Throughput" in r.out and "Errors" in r.out


def test_cleanup_removes_what_it_wrote(cluster, api, bucket, tmp_path):
    pre = put_objects(api, bucket, 5, lambda i: 100)
    r = run_loader(tmp_path, proxy_args(cluster) + [
        "-bucket", bucket, "-pctput", "50", "-maxputs", "120", "-minsize", "2KiB", "-maxsize", "8KiB",
        "-numworkers", "8", "-cleanup"])
    assert r.rc == 0, r
    assert r.summary("PUT")["count"] == 120
    assert r.json["cleanup"]["requests"] == 120 and r.json["cleanup"]["errors"] == 0
    assert listed(api, bucket) == pre  # only what was there before

    # a bucket the loader creates itself is destroyed too
    b2 = unique("ldc")
    r = run_loader(tmp_path, proxy_args(cluster) + [
        "-bucket", b2, "-pctput", "100", "-maxputs", "30", "-minsize", "1KiB", "-maxsize", "1KiB", "-cleanup"])
    assert r.rc == 0, r
    assert api.list_page(b2).status_code == 404


def test_ctrl_c_prints_summary_and_cleans_up(cluster, api, bucket, tmp_path):
    js = tmp_path / "int.json"
    p = subprocess.Popen([LOADER] + proxy_args(cluster) + [
        "-bucket", bucket, "-pctput", "50", "-minsize", "1KiB", "-maxsize", "4KiB", "-duration", "60s",
        "-numworkers", "8", "-cleanup", "-statsinterval", "200ms", "-json", str(js)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert time.monotonic() - t0 < 20
    assert p.returncode == 0, (out, err)
    assert "Summary (run)" in out and "interrupted" in out
    j = json.loads(js.read_text())
    assert j["interrupted"] is True and j["stop_reason"] == "interrupted"
    puts = [r for r in j["summary"] if r["op"] == "PUT"][0]["count"]
    assert puts > 0
    assert j["cleanup"]["requests"] == puts
    assert listed(api, bucket) == {}


class _Counting(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so the loader's connection pool is exercised
    counts = None
    lock = threading.Lock()

    def do_GET(self):
        with self.lock:
            self.counts[self.path] += 1
        super().do_GET()

    def log_message(self, *args):
        pass


@pytest.fixture
def http_server(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    files = {}
    for i in range(15):
        data = os.urandom(500 + 101 * i)
        (root / ("f%02d" % i)).write_bytes(data)
        files["/f%02d" % i] = len(data)
    counts = collections.Counter()
    handler = type("H", (_Counting,), {"counts": counts})

    def make(*a, **kw):
        return handler(*a, directory=str(root), **kw)

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), make)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv.server_address[1], files, counts
    srv.shutdown()
    srv.server_close()


def test_url_list_reads_each_url_once_per_epoch(http_server, tmp_path):
    port, files, counts = http_server
    ul = tmp_path / "urls.txt"
    ul.write_text("# comment\n" + "".join("http://127.0.0.1:%d%s\n" % (port, p) for p in sorted(files)))
    r = run_loader(tmp_path, ["-url-list", str(ul), "-epochs", "3", "-uniquegets", "-numworkers", "4"])
    assert r.rc == 0, r
    get = r.summary("GET")
    assert get["count"] == 45 and get["errors"] == 0
    assert get["bytes"] == 3 * sum(files.values())
    assert dict(counts) == {p: 3 for p in files}  # what the server served, URL by URL
    check_json_adds_up(r)

    # a URL the server does not have counts as an error (and the exit status says so)
    ul.write_text("http://127.0.0.1:%d/nope\n" % port)
    r = run_loader(tmp_path, ["-url-list", str(ul), "-epochs", "2", "-numworkers", "2"])
    assert r.rc == 1
    assert r.summary("GET")["errors"] == 2


SCHED_OTHER, SCHED_BATCH = 0, 3  # the policy numbers in /proc/<pid>/task/<tid>/stat (field 41)


def thread_policies(pid):
    """The scheduling policy of each thread of a running process, from /proc."""
    out = []
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            stat = Path("/proc/%d/task/%s/stat" % (pid, tid)).read_text()
        except FileNotFoundError:  # the thread ended meanwhile
            continue
        out.append(int(stat[stat.rindex(")") + 2:].split()[38]))
    return out


@pytest.mark.parametrize("sched", [None, "batch", "other"])
def test_sched_policy_of_the_loop_threads(http_server, tmp_path, sched):
    """-sched batch (the default) puts every event-loop thread, and only those, under SCHED_BATCH;
    -sched other leaves Linux's default policy. Read from /proc while the loader runs."""
    port, files, _ = http_server
    ul = tmp_path / "urls.txt"
    ul.write_text("".join("http://127.0.0.1:%d%s\n" % (port, p) for p in sorted(files)))
    js = tmp_path / "sched.json"
    cmd = [LOADER, "-url-list", str(ul), "-duration", "30s", "-numworkers", "4", "-iothreads", "2",
           "-statsinterval", "0", "-quiet", "-json", str(js)] + (["-sched", sched] if sched else [])
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    want = [SCHED_OTHER] * 3 if sched == "other" else [SCHED_OTHER, SCHED_BATCH, SCHED_BATCH]
    seen = []
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            seen = sorted(thread_policies(p.pid))
            if len(seen) == 3 and (seen == want or sched == "other"):
                break
            time.sleep(0.05)
        if sched == "other":
            time.sleep(0.5)  # a policy set late would show by now
            seen = sorted(thread_policies(p.pid))
    finally:
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    assert p.returncode == 0, (out, err)
    # the main thread keeps the default policy; the two loop threads take the chosen one
    assert seen == want, (seen, want)
    assert json.loads(js.read_text())["config"]["sched"] == (sched or "batch")
    assert "-sched" not in err, err


def test_s3_api_put_then_verified_gets(cluster, tmp_path):
    """-s3endpoint with SigV4 from the environment, against the proxy's /s3 (path style)."""
    if not cluster.local:
        pytest.skip("FT_CLUSTER_URL is set (external cluster): its S3 key pair is not known to the suite")
    access, secret = cluster.c.s3_keys()
    import boto3
    import botocore.config
    s3 = boto3.client("s3", endpoint_url=cluster.url + "/s3", aws_access_key_id=access,
                      aws_secret_access_key=secret, region_name="us-east-1",
                      config=botocore.config.Config(s3={"addressing_style": "path"}))
    b = unique("lds3")
    s3.create_bucket(Bucket=b)
    env = dict(os.environ, AWS_ACCESS_KEY_ID=access, AWS_SECRET_ACCESS_KEY=secret,
               AWS_DEFAULT_REGION="us-east-1")
    common = ["-s3endpoint", cluster.url + "/s3", "-s3-use-path-style", "-bucket", b, "-numworkers", "6"]

    def run(args):
        js = tmp_path / ("s3-%s.json" % unique("r"))
        p = subprocess.run([LOADER] + common + args + ["-json", str(js)], capture_output=True, text=True,
                           timeout=RUN_TIMEOUT, env=env)
        return p, (json.loads(js.read_text()) if js.exists() else None)

    try:
        p, j = run(["-pctput", "100", "-maxputs", "60", "-minsize", "1KiB", "-maxsize", "32KiB", "-verifyhash"])
        assert p.returncode == 0, (p.stdout, p.stderr)
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket=b).get("Contents", [])]
        assert sorted(keys) == sorted("0-%d" % i for i in range(1, 61))
        p, j = run(["-epochs", "2", "-uniquegets", "-verifyhash"])
        assert p.returncode == 0, (p.stdout, p.stderr)
        get = [r for r in j["summary"] if r["op"] == "GET"][0]
        assert get["count"] == 120 and get["errors"] == 0
        # a wrong secret is refused by the proxy: the loader fails at its listing
        env["AWS_SECRET_ACCESS_KEY"] = secret + "x"
        p, _ = run(["-epochs", "1"])
        assert p.returncode == 2 and "SignatureDoesNotMatch" in p.stderr
    finally:
        for k in s3.list_objects_v2(Bucket=b).get("Contents", []):
            s3.delete_object(Bucket=b, Key=k["Key"])
        s3.delete_bucket(Bucket=b)


# ---- GetBatch (-get-batchsize): POST /v1/batch, TAR answers ----

def _pad512(n):
    return (n + 511) // 512 * 512


def _pax_record_len(key, value):
    body = 1 + len(key) + 1 + len(value) + 1  # " key=value\n"
    n = body + 1
    while len(str(n)) + body != n:
        n += 1
    return n


def batch_member_bytes(bucket, name, size):
    """Bytes of one member of the cluster's GetBatch TAR (target/shard/tar.c): a ustar header, or a PAX
    header with the path first when "<bucket>/<name>" is over 100 bytes; the data padded to 512."""
    full = ("%s/%s" % (bucket, name)).encode()
    head = 512 if len(full) <= 100 else 512 + _pad512(_pax_record_len(b"path", full)) + 512
    return head + _pad512(size)


TAR_END = 1024  # two zero blocks after the last member of every batch


def batch_objects(api, bucket, n):
    """n objects: names that need JSON escaping, a long one (PAX header in the TAR), sizes from 0 to 300 KiB
    (read into the target's slots, or sent from the file; answers over one 192 KiB stream write)."""
    sizes = {}
    special = ['pre/q"uote', "pre/back\\slash", "pre/t\tab", "pre/\u00e9t\u00e9 \u00fc", "pre/" + "l" * 150,
               "pre/empty"]
    for i in range(n):
        name = special[i] if i < len(special) else "pre/%03d" % i
        size = 0 if name == "pre/empty" else 300 * 1024 if i % 17 == 0 else 1000 + 37 * i
        api.put(bucket, name, os.urandom(size))
        sizes[name] = size
    return sizes


@pytest.mark.parametrize("direct", [False, True])
def test_getbatch_reads_each_object_once(cluster, api, bucket, tmp_path, direct):
    """-epochs 1 -uniquegets -get-batchsize 7 over 50 objects: 8 batches (the last of 1 item), 50 members, the
    bytes of the TARs exactly (so each object came once, whole); through the proxy's 307 or straight to the target
    owning most of each batch."""
    sizes = batch_objects(api, bucket, 50)
    r = run_loader(tmp_path, proxy_args(cluster) + [
        "-bucket", bucket, "-epochs", "1", "-uniquegets", "-get-batchsize", "7", "-numworkers", "3",
        "-statsinterval", "100ms"] + (["-direct"] if direct else []))
    assert r.rc == 0, r
    gb = r.summary("GETBATCH")
    assert gb["count"] == 8 and gb["errors"] == 0 and gb["items"] == 50, r
    assert gb["bytes"] == 8 * TAR_END + sum(batch_member_bytes(bucket, n, s) for n, s in sizes.items()), r
    assert gb["items_per_s"] > 0
    assert r.summary("GET")["count"] == 0
    assert r.json["stop_reason"] == "epochs done" and r.json["errors"] == 0
    assert r.json["config"]["get_batchsize"] == 7
    check_json_adds_up(r)
    assert "GETBATCH: 50 items in 8 batches" in r.out, r
    assert "GetBatch of 7" in r.out


def test_getbatch_missing_object_fails_its_batch(cluster, api, bucket, tmp_path):
    """A name the cluster does not have fails the batch holding it (an error, exit status 1, the target's
    message on stderr); the other batches still deliver their items."""
    sizes = put_objects(api, bucket, 10, lambda i: 2000 + i)
    fl = tmp_path / "names.txt"
    fl.write_text("\n".join(sorted(sizes) + ["pre/missing"]) + "\n")
    r = run_loader(tmp_path, proxy_args(cluster) + [
        "-bucket", bucket, "-filelist", str(fl), "-epochs", "1", "-uniquegets", "-get-batchsize", "11"])
    assert r.rc == 1, r
    gb = r.summary("GETBATCH")
    assert gb["count"] == 1 and gb["errors"] == 1 and gb["items"] == 0 and gb["bytes"] == 0, r
    assert "pre/missing" in r.err and "HTTP 404" in r.err, r.err
    assert r.json["errors"] == 1

    # batches of 4, 4 and 3: one fails, the two others deliver theirs
    r = run_loader(tmp_path, proxy_args(cluster) + [
        "-bucket", bucket, "-filelist", str(fl), "-epochs", "1", "-uniquegets", "-get-batchsize", "4",
        "-numworkers", "2", "-direct"])
    assert r.rc == 1, r
    gb = r.summary("GETBATCH")
    assert gb["count"] == 3 and gb["errors"] == 1 and gb["items"] in (7, 8), r
    assert "pre/missing" in r.err


@pytest.mark.parametrize("args,message", [
    (["-get-batchsize", "10001"], "-get-batchsize must be 0..10000"),
    (["-get-batchsize", "-1"], 'bad value "-1" for -get-batchsize'),
    (["-get-batchsize", "8", "-pctput", "10"], "-get-batchsize reads only: it needs -pctput 0"),
    (["-get-batchsize", "8", "-s3endpoint", "http://127.0.0.1:1/s3"], "-get-batchsize works with the native API"),
    (["-get-batchsize", "8", "-url-list", "/dev/null"], "-get-batchsize works with the native API"),
    (["-get-batchsize", "8", "-readoff", "10"], "-get-batchsize reads whole objects"),
    (["-get-batchsize", "8", "-readlen", "1KiB"], "-get-batchsize reads whole objects"),
    (["-get-batchsize", "8", "-verifyhash"], "no -verifyhash"),
])
def test_getbatch_usage_errors(args, message):
    p = subprocess.run([LOADER, "-bucket", "x", "-port", "1"] + args, capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and message in p.stderr, (p.returncode, p.stderr)


@pytest.mark.parametrize("endpoint,message", [
    ("http://AK:S3CRET@127.0.0.1:1/s3", "user:password@"),
    ("http://127.0.0.1:1?X-Amz-Signature=S3CRET", '-s3endpoint "http://127.0.0.1:1?X-Amz-Signature=***" is not'),
])
def test_s3endpoint_secrets_not_repeated(endpoint, message):
    p = subprocess.run([LOADER, "-bucket", "x", "-s3endpoint", endpoint, "-duration", "1s"], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode != 0 and message in p.stderr and "S3CRET" not in p.stdout + p.stderr, (p.returncode, p.stderr)


class _FakeBatch(http.server.BaseHTTPRequestHandler):
    """Answers POST /v1/batch with a TAR built by Python's tarfile (its own writer, padded to 10 KiB records)
    from the items asked, spoiled as `mode` says; records every request (seen) and each TAR's length (sent)."""
    protocol_version = "HTTP/1.1"
    mode = "ok"
    seen = None
    sent = None

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.seen.append((self.path, dict(self.headers), body))
        if self.mode == "redirect" and "hop=2" not in self.path:
            self.send_response(307)
            self.send_header("Location", "http://127.0.0.1:%d/v1/batch?hop=2" % self.server.server_address[1])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.mode == "404":
            msg = json.dumps({"status": 404, "message": "batch item 2 (b/x): does not exist"}).encode()
            self.send_response(404)
            self.send_header("Content-Length", str(len(msg)))
            self.end_headers()
            self.wfile.write(msg)
            return
        names = ["%s/%s" % (e["bucket"], e["objname"]) for e in json.loads(body)["in"]]
        if self.mode == "short":
            names = names[:-1]
        elif self.mode == "order":
            names = names[::-1]
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
            for n in names:
                data = n.encode() * 3
                ti = tarfile.TarInfo(n)
                ti.size = len(data)
                tf.addfile(ti, io.BytesIO(data))
        tar = bytearray(buf.getvalue())
        if self.mode == "badsum":
            tar[1] ^= 0x01  # a name byte of the first header
        self.sent.append(len(tar))
        self.send_response(200)
        self.send_header("Content-Length", str(len(tar)))
        self.end_headers()
        if self.mode == "cut":
            self.wfile.write(tar[:len(tar) // 2])
            self.close_connection = True
            return
        self.wfile.write(tar)

    def log_message(self, *args):
        pass


FAKE_NAMES = ["f/plain", 'f/q"uote', "f/back\\slash", "f/t\tab", "f/\u00e9t\u00e9 \u00fc"]


@pytest.fixture
def fake_batch_server():
    seen, sent = [], []

    def start(mode):
        handler = type("H", (_FakeBatch,), {"mode": mode, "seen": seen, "sent": sent})
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        srv.daemon_threads = True
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return srv.server_address[1]

    servers = []
    yield start, seen, sent
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def run_against_fake(tmp_path, port, extra=()):
    fl = tmp_path / "fake-names.txt"
    fl.write_text("\n".join(FAKE_NAMES) + "\n", encoding="utf-8")
    return run_loader(tmp_path, ["-ip", "127.0.0.1", "-port", str(port), "-bucket", "bk", "-filelist", str(fl),
                                 "-epochs", "1", "-uniquegets", "-get-batchsize", "5", "-numworkers", "1"]
                      + list(extra))


@pytest.mark.parametrize("mode", ["ok", "redirect"])
def test_getbatch_request_on_the_wire(fake_batch_server, tmp_path, mode):
    """The request is POST /v1/batch with {"in": [{"bucket", "provider", "objname"}...], "format": ".tar"},
    names escaped, no Expect: 100-continue; a 307 is followed with the same body; a TAR of another writer
    (tarfile: PAX headers for the non-ASCII name, zeros up to its record size) is taken whole."""
    start, seen, sent = fake_batch_server
    port = start(mode)
    r = run_against_fake(tmp_path, port)
    assert r.rc == 0, r
    gb = r.summary("GETBATCH")
    assert gb["count"] == 1 and gb["errors"] == 0 and gb["items"] == 5, r
    assert len(seen) == (2 if mode == "redirect" else 1)
    for path, headers, body in seen:
        assert path.startswith("/v1/batch")
        assert "Expect" not in headers and int(headers["Content-Length"]) == len(body)
        doc = json.loads(body)
        assert set(doc) == {"in", "format"} and doc["format"] == ".tar"
        assert [set(e) for e in doc["in"]] == [{"bucket", "provider", "objname"}] * 5
        assert {(e["bucket"], e["provider"]) for e in doc["in"]} == {("bk", "ais")}
        assert sorted(e["objname"] for e in doc["in"]) == sorted(FAKE_NAMES)
    if mode == "redirect":
        assert seen[1][0] == "/v1/batch?hop=2" and seen[0][2] == seen[1][2]
    assert len(sent) == 1 and gb["bytes"] == sent[0] and sent[0] % 10240 == 0


@pytest.mark.parametrize("mode,message", [
    ("short", "the TAR answer holds 4 members for 5 items asked"),
    ("order", "where item 0"),
    ("badsum", "bad header checksum at offset 0"),
    ("cut", "connection closed mid-body"),
    ("404", "HTTP 404: {\"status\": 404, \"message\": \"batch item 2 (b/x): does not exist\"}"),
])
def test_getbatch_bad_answers_are_errors(fake_batch_server, tmp_path, mode, message):
    """A batch whose answer is not the TAR asked for (a member short, out of order, a corrupt header, cut) or
    an error status fails with a message saying so, and the exit status is 1."""
    start, _, _ = fake_batch_server
    r = run_against_fake(tmp_path, start(mode))
    assert r.rc == 1, r
    gb = r.summary("GETBATCH")
    assert gb["count"] == 1 and gb["errors"] == 1 and gb["items"] == 0 and gb["bytes"] == 0, r
    assert "GETBATCH [5 items from" in r.err and message in r.err, r.err


def test_loadgen_run_once_batch(cluster, api, bucket, tmp_path):
    """bench/loadgen.py's Loader.run_once_batch: every object once in batches; its requests are the objects."""
    import sys
    sys.path.insert(0, str(ROOT / "bench"))
    import loadgen
    sizes = put_objects(api, bucket, 20, lambda i: 4096)
    names = tmp_path / "batch-names.txt"
    names.write_text("\n".join(sorted(sizes)) + "\n")
    port = urllib.parse.urlsplit(cluster.url).port
    for direct in (True, False):
        res = loadgen.Loader(LOADER).run_once_batch(port, bucket, str(names), 4096, 6, 2, direct=direct)
        assert (res.requests, res.errors) == (20, 0), res.to_json()
        assert res.seconds > 0 and res.bps == res.rps * 4096
    names.write_text("pre/000\npre/missing\n")
    res = loadgen.Loader(LOADER).run_once_batch(port, bucket, str(names), 4096, 6, 1)
    assert (res.requests, res.errors) == (0, 1) and "1 failed batches" in res.detail, res.to_json()
