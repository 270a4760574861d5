# SPDX-License-Identifier: Apache-2.0
# Transformers (ETL): the registry, inline GETs (native and S3), copy jobs with etl, transformer servers, failures.
import http.server
import json
import os
import subprocess
import threading
import time

import pytest

import s3util
from ftutil import TIMEOUT, Api, add_key, assert_json_error, session, unique, wait_job, wait_until


def register(api, spec, expect=200):
    r = api.s.post(api.url + "/v1/etl", json=spec, timeout=TIMEOUT)
    assert r.status_code == expect, r.text
    return r


def remove(api, name, expect=200):
    r = api.s.delete(api.url + "/v1/etl/" + name, timeout=TIMEOUT)
    assert expect is None or r.status_code == expect, r.text


def get_etl(api, bucket, name, etl):
    return api.s.get("%s/v1/objects/%s/%s?etl=%s" % (api.url, bucket, name, etl), timeout=TIMEOUT)


def copy(api, src, dst, etl, **value):
    value.update({"to": {"name": dst}, "etl": etl})
    act = "copy-listrange" if "objnames" in value else "copy-bck"
    r = api.s.post("%s/v1/buckets/%s" % (api.url, src), json={"action": act, "value": value}, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return wait_job(api, r.json()["job_id"])


@pytest.fixture
def bucket(api):
    b = unique("etl")
    api.create_bucket(b)
    yield b
    api.destroy_bucket(b, expect=None)


@pytest.fixture
def upper(api):
    name = unique("upper")
    register(api, {"name": name, "command": ["tr", "a-z", "A-Z"]})
    yield name
    remove(api, name, expect=None)


class _Reverser(http.server.BaseHTTPRequestHandler):
    """A transformer server: answers the POSTed bytes reversed; /fail answers 500, /slow waits 3 s."""

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path == "/fail":
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b"cannot transform this")
            return
        if self.path == "/slow":
            time.sleep(3)
        out = body[::-1]
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def reverser():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Reverser)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield "http://127.0.0.1:%d" % srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def test_registry_register_list_show_remove(api):
    name = unique("reg")
    spec = register(api, {"name": name, "command": ["tr", "a-z", "A-Z"], "timeout_ms": 5000}).json()
    assert spec == {"name": name, "command": ["tr", "a-z", "A-Z"], "timeout_ms": 5000,
                    "max_output": 256 << 20, "procs": 4}
    assert_json_error(register(api, {"name": name, "command": ["cat"]}, expect=409), 409, "already exists")
    listed = api.s.get(api.url + "/v1/etl", timeout=TIMEOUT).json()
    assert spec in listed
    assert api.s.get(api.url + "/v1/etl/" + name, timeout=TIMEOUT).json() == spec
    assert "etl" in api.bmd() and name in api.bmd()["etl"]
    remove(api, name)
    assert_json_error(api.s.get(api.url + "/v1/etl/" + name, timeout=TIMEOUT), 404, "does not exist")
    assert_json_error(api.s.delete(api.url + "/v1/etl/" + name, timeout=TIMEOUT), 404)


@pytest.mark.parametrize("spec,why", [
    ({"command": ["cat"]}, "name"),
    ({"name": "x y", "command": ["cat"]}, "name"),
    ({"name": "x"}, "exactly one"),
    ({"name": "x", "command": ["cat"], "url": "http://h/"}, "exactly one"),
    ({"name": "x", "command": []}, "command"),
    ({"name": "x", "command": "tr a-z A-Z"}, "command"),
    ({"name": "x", "command": ["cat", 1]}, "command[1]"),
    ({"name": "x", "url": "ftp://h/"}, "url"),
    ({"name": "x", "command": ["cat"], "timeout_ms": 0}, "timeout_ms"),
    ({"name": "x", "command": ["cat"], "max_output": "big"}, "max_output"),
    ({"name": "x", "command": ["cat"], "procs": 1000}, "procs"),
    ({"name": "x", "command": ["cat"], "shell": True}, "unknown field"),
])
def test_registry_bad_bodies(api, spec, why):
    assert_json_error(register(api, spec, expect=400), 400, why)


def test_inline_command_native(api, bucket, upper):
    data = b"hello, transformed world\n" * 1000
    api.put(bucket, "a/obj.txt", data)
    r = get_etl(api, bucket, "a/obj.txt", upper)
    assert r.status_code == 200, r.text
    assert r.content == data.upper()
    assert r.headers["Ais-Etl"] == upper
    assert api.get(bucket, "a/obj.txt").content == data  # stored unchanged
    api.put(bucket, "empty", b"")
    r = get_etl(api, bucket, "empty", upper)
    assert r.status_code == 200 and r.content == b""
    assert_json_error(get_etl(api, bucket, "missing", upper), 404, "does not exist")


def test_inline_s3_boto3(cluster, api, bucket, upper):
    s3 = s3util.client(cluster)
    data = b"through the s3 front end"
    s3.put_object(Bucket=bucket, Key="k/one", Body=data)

    def add_etl(request, **_kw):
        request.url += ("&" if "?" in request.url else "?") + "etl=" + upper

    s3.meta.events.register("before-sign.s3.GetObject", add_etl)
    assert s3.get_object(Bucket=bucket, Key="k/one")["Body"].read() == data.upper()
    s3.meta.events.unregister("before-sign.s3.GetObject", add_etl)
    assert s3.get_object(Bucket=bucket, Key="k/one")["Body"].read() == data


def test_offline_copy_with_etl(api, bucket, upper):
    data = {"d/%03d" % i: os.urandom(50).hex().encode() * (i + 1) for i in range(12)}
    for k, v in data.items():
        api.put(bucket, k, v, headers={"Content-Type": "text/plain", "x-amz-meta-idx": k})
    dst = unique("etldst")
    try:
        st = copy(api, bucket, dst, upper)
        assert st["state"] == "finished" and st["objects"] == 12 and st["errors"] == 0, st
        assert st["to"] == {"provider": "ais", "bucket": dst, "etl": upper}, st
        for k, v in data.items():
            r = api.get(dst, k)
            assert r.status_code == 200 and r.content == v.upper(), k
            assert r.headers["x-amz-meta-idx"] == k
        # a re-run sends every object again (the transformed output is not compared)
        st = copy(api, bucket, dst, upper, objnames=["d/000", "d/001"])
        assert st["objects"] == 2 and st["skipped"] == 0, st
    finally:
        api.destroy_bucket(dst, expect=None)


def test_offline_copy_unknown_etl_is_404(api, bucket):
    api.put(bucket, "x", b"x")
    r = api.s.post("%s/v1/buckets/%s" % (api.url, bucket),
                   json={"action": "copy-bck", "value": {"to": {"name": unique("nd")}, "etl": "no-such-etl"}},
                   timeout=TIMEOUT)
    assert_json_error(r, 404, "no-such-etl")


def test_http_transformer_inline_and_offline(api, bucket, reverser):
    name = unique("rev")
    register(api, {"name": name, "url": reverser + "/"})
    dst = unique("revdst")
    try:
        data = {"r/%d" % i: os.urandom(3000 + i) for i in range(6)}
        for k, v in data.items():
            api.put(bucket, k, v)
        r = get_etl(api, bucket, "r/0", name)
        assert r.status_code == 200 and r.content == data["r/0"][::-1]
        st = copy(api, bucket, dst, name, prefix="r/")
        assert st["objects"] == 6 and st["errors"] == 0, st
        for k, v in data.items():
            assert api.get(dst, k).content == v[::-1]
    finally:
        remove(api, name, expect=None)
        api.destroy_bucket(dst, expect=None)


@pytest.mark.parametrize("spec,status,why", [
    ({"command": ["sh", "-c", "cat >/dev/null; echo oops >&2; exit 1"]}, 502, "exited with status 1: oops"),
    ({"command": ["sleep", "10"], "timeout_ms": 300}, 504, "timed out"),
    ({"command": ["head", "-c", "100000", "/dev/zero"], "max_output": 1000}, 502, "over its limit"),
    ({"command": ["/no/such/program"]}, 502, "cannot run"),
    ({"url": "{srv}/fail"}, 502, "HTTP 500: cannot transform this"),
    ({"url": "{srv}/slow", "timeout_ms": 300}, 504, "timed out"),
])
def test_failing_transformer_inline_and_offline(api, bucket, reverser, spec, status, why):
    name = unique("bad")
    spec = dict(spec, name=name)
    if "url" in spec:
        spec["url"] = spec["url"].replace("{srv}", reverser)
    register(api, spec)
    dst = unique("baddst")
    try:
        for i in range(3):
            api.put(bucket, "f/%d" % i, b"some bytes %d" % i)
        t0 = time.monotonic()
        assert_json_error(get_etl(api, bucket, "f/0", name), status, why)
        assert time.monotonic() - t0 < 8
        st = copy(api, bucket, dst, name, prefix="f/")
        assert st["errors"] == 3 and st["objects"] == 0, st
        samples = " ".join(st["error_samples"])
        assert "f/0" in samples and why.split(":")[0] in samples, samples
        assert api.list_all(dst)[0] == []  # never a partial destination object
    finally:
        remove(api, name, expect=None)
        api.destroy_bucket(dst, expect=None)


def test_copy_etl_timeout_of_the_job(api, bucket, reverser):
    """etl_timeout_ms bounds each object's transform in that copy job, in place of the transformer's timeout_ms,
    for a command and for a transformer server."""
    dst = unique("tmodst")
    names = []
    try:
        for spec in ({"command": ["sh", "-c", "sleep 3; cat"]}, {"url": reverser + "/slow"}):
            names.append(unique("slowetl"))
            register(api, dict(spec, name=names[-1], timeout_ms=60000))
        api.put(bucket, "t/0", b"slow bytes")
        for name in names:
            st = copy(api, bucket, dst, name, prefix="t/", etl_timeout_ms=200)
            assert st["errors"] == 1 and st["objects"] == 0, st
            assert "timed out after 200 ms" in " ".join(st["error_samples"]), st["error_samples"]
        assert api.list_all(dst)[0] == []
    finally:
        for name in names:
            remove(api, name, expect=None)
        api.destroy_bucket(dst, expect=None)


def test_unknown_etl_inline_is_404(cluster, api, bucket):
    api.put(bucket, "o", b"data")
    assert_json_error(get_etl(api, bucket, "o", "no-such-etl"), 404, "no-such-etl")
    s3 = s3util.client(cluster)

    def add_etl(request, **_kw):
        request.url += "?etl=no-such-etl"

    s3.meta.events.register("before-sign.s3.GetObject", add_etl)
    with pytest.raises(Exception) as e:
        s3.get_object(Bucket=bucket, Key="o")
    assert "404" in str(e.value) or "NoSuch" in str(e.value), e.value


def test_procs_bound_serializes(api, bucket):
    name = unique("slow")
    register(api, {"name": name, "command": ["sh", "-c", "sleep 0.4; cat"], "procs": 1})
    try:
        api.put(bucket, "s", b"x")  # one object: one owner, so every GET goes through the same slot
        results = []

        def one():
            results.append(get_etl(api, bucket, "s", name).status_code)

        t0 = time.monotonic()
        threads = [threading.Thread(target=one) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == [200, 200, 200]
        assert time.monotonic() - t0 >= 1.1  # three runs one after the other
    finally:
        remove(api, name, expect=None)


def test_registry_survives_restarts(make_cluster):
    h = make_cluster(targets=2, mountpaths=1)
    api = Api(h.url, session())
    name = unique("keep")
    register(api, {"name": name, "command": ["tr", "a-z", "A-Z"]})
    b = unique("keepb")
    api.create_bucket(b)
    for i in range(8):
        api.put(b, "o%d" % i, b"abc%d" % i)
    # the registry reaches a restarted target (from the proxy, at its join)
    for i in range(2):
        h.kill_target(i)
        h.restart_target(i)
    wait_until(lambda: len(h.targets()) == 2, 30, what="both targets back")
    for i in range(8):
        r = wait_until(lambda: (lambda r: r if r.status_code == 200 else None)(get_etl(api, b, "o%d" % i, name)),
                       20, what="GET with etl after the restart")
        assert r.content == b"ABC%d" % i
    # and a restarted proxy (bmd.json)
    p = h.c.proxy
    p.signal(15)
    assert p.wait_dead(10)
    p.spawn(h.c.env)
    h.c.wait_ready(30)
    assert [s["name"] for s in api.s.get(h.url + "/v1/etl", timeout=TIMEOUT).json()] == [name]


def test_registering_needs_admin(make_cluster):
    h = make_cluster(targets=1, mountpaths=1, auth=True)
    rw = add_key(h, "RW", "rw-secret-0123456789", "readwrite")
    spec = {"name": "upper", "command": ["tr", "a-z", "A-Z"]}
    r = session(token=rw).post(h.url + "/v1/etl", json=spec, timeout=TIMEOUT)
    assert r.status_code == 403, r.text
    assert session(token=rw).get(h.url + "/v1/etl", timeout=TIMEOUT).json() == []
    assert session(token=h.token).post(h.url + "/v1/etl", json=spec, timeout=TIMEOUT).status_code == 200
    assert session(token=rw).delete(h.url + "/v1/etl/upper", timeout=TIMEOUT).status_code == 403
    # an inline GET needs only read access
    admin = Api(h.url, token=h.token)
    b = unique("authb")
    admin.create_bucket(b)
    admin.put(b, "o", b"lower")
    r = session(token=rw).get("%s/v1/objects/%s/o?etl=upper" % (h.url, b), timeout=TIMEOUT)
    assert r.status_code == 200 and r.content == b"LOWER", r.text


FT = os.path.join(os.environ.get("FT_BIN", os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin")), "ft")


def ft(cluster, *args):
    e = {k: v for k, v in os.environ.items() if not k.startswith("FT_")}
    e["HOME"] = "/nonexistent"
    e["FT_ENDPOINT"] = cluster.url
    p = subprocess.run([FT, *args], env=e, capture_output=True, timeout=120)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace"), p.stdout


@pytest.mark.parametrize("cmd", [["etl"], ["etl", "init"], ["etl", "ls"], ["etl", "show"], ["etl", "rm"]])
def test_cli_help(cluster, cmd):
    rc, out, err, _ = ft(cluster, *cmd, "--help")
    assert rc == 0 and out.startswith("Usage: ft"), (cmd, out, err)


def test_cli_etl_and_transform_job(cluster, api, bucket):
    name = unique("cli")
    rc, out, err, _ = ft(cluster, "etl", "init", name, "--timeout", "9000", "--", "tr", "a-z", "A-Z")
    assert rc == 0 and out.strip() == name, err
    rc, out, err, _ = ft(cluster, "etl", "init", name, "--", "cat")
    assert rc == 1 and "409" in err and "already exists" in err, err
    rc, out, err, _ = ft(cluster, "etl", "ls")
    assert rc == 0 and name in out and "tr a-z A-Z" in out and "9000 ms" in out, out
    rc, out, err, _ = ft(cluster, "etl", "show", name, "--json")
    assert rc == 0 and json.loads(out)["command"] == ["tr", "a-z", "A-Z"], out
    api.put(bucket, "t/one", b"make me loud")
    rc, out, err, raw = ft(cluster, "object", "cat", bucket + "/t/one", "--etl", name)
    assert rc == 0 and raw == b"MAKE ME LOUD", err
    rc, out, err, _ = ft(cluster, "object", "cat", bucket + "/t/one", "--etl", "no-such-etl")
    assert rc == 1 and "404" in err, err
    dst = unique("clidst")
    try:
        rc, out, err, _ = ft(cluster, "job", "start", "transform", bucket, dst, "--prefix", "t/")
        assert rc == 2 and "--etl" in err, err
        rc, out, err, _ = ft(cluster, "job", "start", "transform", bucket, dst, "--etl", name, "--prefix", "t/",
                             "--wait")
        assert rc == 0, (out, err)
        assert api.get(dst, "t/one").content == b"MAKE ME LOUD"
    finally:
        api.destroy_bucket(dst, expect=None)
    rc, out, err, _ = ft(cluster, "etl", "rm", name)
    assert rc == 0, err
    rc, out, err, _ = ft(cluster, "etl", "rm", name)
    assert rc == 1 and "404" in err, err
    rc, out, err, _ = ft(cluster, "etl", "init", "x", "--url", "ftp://nope")
    assert rc == 1 and "400" in err, err
