# SPDX-License-Identifier: Apache-2.0
# Download jobs: URLs, templates and URL lists into a bucket; retries, bad input, expiry, abort, resume after a kill.
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import peers
from ftutil import TIMEOUT, Api, assert_json_error, unique, wait_job, wait_until
from test_coldget import put_origin

origin = peers.nginx_origin_fixture()


class Flaky:
    """A small origin: /fail/N/<name> answers 503 N times then 200; /slow/<name> sleeps delay s first; /gone 404."""

    def __init__(self):
        self.hits = {}
        self.delay = 0.0
        self.lock = threading.Lock()
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                with outer.lock:
                    outer.hits[self.path] = outer.hits.get(self.path, 0) + 1
                    n = outer.hits[self.path]
                parts = self.path.split("/")
                if parts[1] == "fail" and n <= int(parts[2]):
                    self.send_response(503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if parts[1] == "gone":
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if parts[1] == "slow":
                    time.sleep(outer.delay)
                body = ("body of " + parts[-1]).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def fetched(self, prefix):
        with self.lock:
            return sum(v for k, v in self.hits.items() if k.startswith(prefix))

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def flaky():
    f = Flaky()
    yield f
    f.close()


@pytest.fixture
def bucket(api):
    b = unique("dl")
    api.create_bucket(b)
    yield b
    api.destroy_bucket(b, expect=None)


def download(api, bucket, value, expect=200):
    r = api.s.post(f"{api.url}/v1/buckets/{bucket}", json={"action": "download", "value": value}, timeout=TIMEOUT)
    assert r.status_code == expect, r.text
    return r


def test_download_urls_and_template(api, bucket, origin):
    data = {}
    for i in range(20):
        n = f"{bucket}-t-{i:02d}.tar"
        data[n] = os.urandom(2000 + 13 * i)
        put_origin(origin, n, data[n])
    jid = download(api, bucket, {"template": f"{origin.url}/{bucket}-t-{{00..19}}.tar"}).json()["job_id"]
    st = wait_job(api, jid)
    assert st["state"] == "finished" and st["kind"] == "download", st
    assert st["objects"] == 20 and st["errors"] == 0 and st["total"] == 20, st
    assert st["bytes"] == sum(len(v) for v in data.values())
    assert sum(p["objects"] for p in st["targets"]) == 20
    for n, body in data.items():
        assert api.get(bucket, n).content == body
    # a list of URLs, the query string left out of the name
    jid = download(api, bucket, {"urls": [f"{origin.url}/{bucket}-t-00.tar?x=1"]}).json()["job_id"]
    assert wait_job(api, jid)["objects"] == 1


def test_download_url_list_object(api, bucket, origin):
    names = [f"{bucket}-l-{i}.bin" for i in range(5)]
    for n in names:
        put_origin(origin, n, n.encode() * 10)
    api.put(bucket, "lists/urls.txt", ("\r\n".join(f"{origin.url}/{n}" for n in names) + "\n\n").encode())
    jid = download(api, bucket, {"url_list_object": "lists/urls.txt"}).json()["job_id"]
    st = wait_job(api, jid)
    assert st["objects"] == 5 and st["errors"] == 0, st
    for n in names:
        assert api.get(bucket, n).content == n.encode() * 10
    assert_json_error(download(api, bucket, {"url_list_object": "lists/none.txt"}, expect=404), 404,
                      "no such object")
    # a line that is not UTF-8 text is refused, never skipped
    api.put(bucket, "lists/bad.txt", f"{origin.url}/{names[0]}\n".encode() + b"http://h/\xff\xfe.bin\n")
    assert_json_error(download(api, bucket, {"url_list_object": "lists/bad.txt"}, expect=400), 400, "line 2")



def test_download_url_list_object_with_auth(make_cluster, origin):
    # with authentication on, the proxy reads the URL list from its owner through a signed URL
    h = make_cluster(targets=2, mountpaths=1, auth=True)
    api = Api(h.url, token=h.token)
    bucket = unique("dlauth")
    api.create_bucket(bucket)
    names = [f"{bucket}-a-{i}.bin" for i in range(3)]
    for n in names:
        put_origin(origin, n, n.encode() * 7)
    api.put(bucket, "urls.txt", "\n".join(f"{origin.url}/{n}" for n in names).encode())
    st = wait_job(h, download(api, bucket, {"url_list_object": "urls.txt"}).json()["job_id"])
    assert st["objects"] == 3 and st["errors"] == 0, st
    for n in names:
        assert api.get(bucket, n).content == n.encode() * 7

def test_download_retries_and_errors(api, bucket, flaky):
    urls = [f"{flaky.url}/fail/2/a.bin", f"{flaky.url}/fail/9/b.bin", f"{flaky.url}/gone/c.bin",
            f"{flaky.url}/fail/0/d.bin"]
    st = wait_job(api, download(api, bucket, {"urls": urls}).json()["job_id"])
    assert st["state"] == "finished", st
    assert st["objects"] == 2 and st["errors"] == 2, st
    assert api.get(bucket, "a.bin").content == b"body of a.bin"
    assert flaky.hits["/fail/2/a.bin"] == 3  # two 503s, then the body
    assert flaky.hits["/fail/9/b.bin"] == 4  # gave up after 4 attempts
    assert flaky.hits["/gone/c.bin"] == 1  # a 404 is not tried again
    samples = " ".join(st["error_samples"])
    assert "b.bin" in samples and "503" in samples and "after 4 attempts" in samples, samples
    assert "c.bin" in samples and "404" in samples, samples
    assert api.get(bucket, "c.bin").status_code == 404


@pytest.mark.parametrize("value,text", [
    (None, "download needs a value"),
    ({}, "download needs a value"),
    ({"urls": "http://x/a"}, "urls must be an array"),
    ({"urls": []}, "1 to"),
    ({"urls": ["ftp://x/a"]}, "not an http"),
    ({"urls": ["http://x"]}, "no path"),
    ({"urls": ["http://x/dir/"]}, "does not end in a name"),
    ({"urls": ["http://x/a", "http://y/a"]}, "names object \"a\" too"),
    ({"urls": ["http://x/a"], "template": "http://x/{1..2}"}, "download needs a value"),
    ({"template": "http://x/{5..1}"}, "bad template"),
    ({"url_list_object": 3}, "url_list_object"),
])
def test_download_bad_values(api, bucket, value, text):
    assert_json_error(download(api, bucket, value, expect=400), 400, text)


def test_download_unknown_bucket(api):
    assert_json_error(download(api, unique("nosuch"), {"urls": ["http://127.0.0.1:1/a"]}, expect=404), 404)


def test_abort_and_expiry(make_cluster, flaky):
    c = make_cluster(target_args=["--job_expiry_s", "2"])
    api = Api(c.url)
    b = unique("dl")
    api.create_bucket(b)
    flaky.delay = 0.5
    urls = [f"{flaky.url}/slow/s{i:03d}" for i in range(200)]
    jid = download(api, b, {"urls": urls}).json()["job_id"]
    st = api.s.get(f"{c.url}/v1/jobs/{jid}", timeout=TIMEOUT).json()
    assert st["state"] == "running" and "inflight" in st, st
    wait_until(lambda: api.s.get(f"{c.url}/v1/jobs/{jid}", timeout=TIMEOUT).json()["inflight"], 10,
               what="objects in flight")
    r = api.s.delete(f"{c.url}/v1/jobs/{jid}", timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    st = wait_job(api, jid)
    assert st["state"] == "aborted" and st["objects"] < 200, st
    # finished jobs leave the targets' tables after job_expiry_s
    wait_until(lambda: api.s.get(f"{c.url}/v1/jobs/{jid}", timeout=TIMEOUT).status_code == 404, 10,
               what="the job expires")
    assert jid not in [j["id"] for j in api.s.get(f"{c.url}/v1/jobs", timeout=TIMEOUT).json()]


def job_doc(api, jid):
    r = api.s.get(f"{api.url}/v1/jobs/{jid}", timeout=TIMEOUT)
    return r.json() if r.status_code == 200 else None


def test_resume_after_target_kill(make_cluster, flaky):
    c = make_cluster()
    api = Api(c.url)
    b = unique("dl")
    api.create_bucket(b)
    flaky.delay = 0.3
    n = 90
    urls = [f"{flaky.url}/slow/r{i:03d}" for i in range(n)]
    jid = download(api, b, {"urls": urls}).json()["job_id"]
    victim_id = c.targets()[0]["id"]
    victim = c.index_of_url(c.targets()[0]["public_url"])

    def victim_part():
        d = job_doc(api, jid)
        return next((p for p in d["targets"] if p["node"] == victim_id), None) if d else None
    wait_until(lambda: (victim_part() or {}).get("objects", 0) >= 3, 30, what="the victim has done some")
    c.kill_target(victim, "KILL")
    c.restart_target(victim)
    st = wait_job(api, jid, timeout=120)
    assert st["state"] == "finished", st
    assert st["objects"] == n and st["errors"] == 0 and st["total"] == n, st
    part = next(p for p in st["targets"] if p["node"] == victim_id)
    assert part["objects"] == part["total"] > 0, part
    # objects the victim had done before the kill were not fetched again (at most those in flight were)
    assert flaky.fetched("/slow/") <= n + 4, flaky.fetched("/slow/")
    for i in range(n):
        assert api.get(b, f"r{i:03d}").content == f"body of r{i:03d}".encode()


def test_target_gone_for_good_reads_incomplete(make_cluster, flaky):
    """A target killed mid-job and never restarted: the job reads running (its part missing) while the
    others work and for the grace after they end, then incomplete; never finished without that part."""
    c = make_cluster(proxy_args=["--job_missing_grace_s", "3"])
    api = Api(c.url)
    b = unique("dl")
    api.create_bucket(b)
    flaky.delay = 0.2
    n = 60
    jid = download(api, b, {"urls": [f"{flaky.url}/slow/g{i:03d}" for i in range(n)]}).json()["job_id"]
    victim_id = c.targets()[0]["id"]
    victim = c.index_of_url(c.targets()[0]["public_url"])
    wait_until(lambda: any(p["node"] == victim_id and p.get("objects", 0) >= 1
                           for p in (job_doc(api, jid) or {}).get("targets", [])), 30, what="the victim has started")
    c.kill_target(victim, "KILL")
    # every poll answers 200 even while the killed target is still in the map and refuses connections
    seen_missing = []

    def ended():
        d = job_doc(api, jid)
        assert d is not None
        if d["state"] == "running" and victim_id in d.get("missing", []):
            seen_missing.append(d)
        return d["state"] != "running"
    wait_until(ended, 60, interval=0.1, what="the job ends")
    st = job_doc(api, jid)
    assert st["state"] == "incomplete", st
    assert st["missing"] == [victim_id], st
    assert any(p["node"] == victim_id and p["state"] == "missing" for p in st["targets"]), st
    assert st["objects"] < n and any("never reported its part" in e for e in st["error_samples"]), st
    # it read running, with the part missing, before the grace ran out
    assert seen_missing, "the job never showed the missing part while running"
    assert all(p["state"] in ("finished", "missing") for p in st["targets"]), st
