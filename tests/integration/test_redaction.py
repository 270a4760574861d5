# SPDX-License-Identifier: Apache-2.0
# Signatures and tokens carried in URLs never reach a log, a job status or an error body: download jobs, ht redirects,
# the proxy's S3 relay, a target's 404, transformer URLs, remote buckets' endpoints.
import base64
import os
import re
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

import s3util
from ftutil import TIMEOUT, create_remote, obj_url, unique, wait_job


def presigned_query(sig):
    """The query of a presigned S3 URL, with a signature, a credential and a session token made of sig."""
    return ("X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=CRED%s%%2F20250101%%2Fus-east-1%%2Fs3%%2Faws4_request"
            "&X-Amz-Date=20250101T000000Z&X-Amz-Expires=60&X-Amz-Security-Token=TOKEN%s"
            "&X-Amz-SignedHeaders=host&X-Amz-Signature=%s" % (sig, sig, sig))


def logs_text(h):
    text = ""
    for path in h.c.log_paths():
        with open(path, errors="replace") as f:
            text += f.read()
    return text


def assert_hidden(sig, *texts):
    for t in texts:
        assert sig not in t, t[:2000]


class Origin:
    """/deny/<name>: 403; /moved/<name>: 302 to a presigned URL whose signature is self.sig; POST /etl?token=<sig>
    with Basic auth u:<sig>: the body reversed (a transformer that needs the credentials of its URL)."""

    def __init__(self):
        self.sig = secrets.token_hex(16)
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def answer(self):
                if self.path.startswith("/moved/"):
                    self.send_response(302)
                    self.send_header("Location", "https://bucket.s3.amazonaws.com%s?%s" % (
                        self.path[len("/moved"):], presigned_query(outer.sig)))
                else:
                    self.send_response(403)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self):
                self.answer()

            def do_HEAD(self):
                self.answer()

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                basic = "Basic " + base64.b64encode(("u:" + outer.sig).encode()).decode()
                ok = self.path == "/etl?token=" + outer.sig and self.headers.get("Authorization") == basic
                self.send_response(200 if ok else 403)
                self.send_header("Content-Length", str(len(body) if ok else 0))
                self.end_headers()
                if ok:
                    self.wfile.write(body[::-1])

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def origin():
    o = Origin()
    yield o
    o.close()


def test_download_error_hides_presigned_query(cluster, api, origin):
    """A download of a presigned URL that fails: the job's errors and the logs name the URL without its signature."""
    cluster.require_local("reads the nodes' logs")
    b = unique("dlsig")
    api.create_bucket(b)
    try:
        url = "%s/deny/obj.bin?%s" % (origin.url, presigned_query(origin.sig))
        r = api.s.post(f"{api.url}/v1/buckets/{b}", json={"action": "download", "value": {"urls": [url]}},
                       timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        job = r.json()["job_id"]
        st = wait_job(api, job)
        assert st["errors"] == 1, st
        samples = " ".join(st["error_samples"])
        status = api.s.get(f"{api.url}/v1/jobs/{job}", timeout=TIMEOUT).text
        assert_hidden(origin.sig, samples, status, logs_text(cluster))
        assert "/deny/obj.bin" in samples and "403" in samples, samples  # still says which URL and why
    finally:
        api.destroy_bucket(b, expect=None)


def test_bad_download_template_is_named_without_secrets(cluster, api):
    sig, b = secrets.token_hex(16), unique("dltpl")
    api.create_bucket(b)
    try:
        tpl = "https://u:%s@h/o{000..}.bin?%s" % (sig, presigned_query(sig))
        r = api.s.post(f"{api.url}/v1/buckets/{b}", json={"action": "download", "value": {"template": tpl}},
                       timeout=TIMEOUT)
        assert r.status_code == 400 and 'bad template \\"https://h/o{000..}.bin?X-Amz-Algorithm=***' in r.text, r.text
        assert_hidden(sig, r.text)
    finally:
        api.destroy_bucket(b, expect=None)


def test_ht_redirect_hides_location_query(cluster, origin):
    """An ht:// origin redirecting to a presigned URL: the 3xx is refused, naming the Location without its query."""
    cluster.require_local("reads the nodes' logs")
    b = unique("htsig")
    create_remote(cluster.url, b, "ht", {"endpoint": origin.url + "/moved"})
    try:
        r = requests.get(obj_url(cluster.url, b, "o.bin"), timeout=TIMEOUT)
        assert r.status_code >= 400, r.text
        assert "redirect to https://bucket.s3.amazonaws.com/o.bin" in r.text, r.text
        r2 = requests.post(f"{cluster.url}/v1/buckets/{b}?provider=ht", timeout=TIMEOUT,
                           json={"action": "prefetch-listrange", "value": {"objnames": ["p.bin"]}})
        assert r2.status_code == 200, r2.text
        st = wait_job(cluster, r2.json()["job_id"])
        assert "redirect to" in " ".join(st["error_samples"]), st
        assert_hidden(origin.sig, r.text, str(st), logs_text(cluster))
    finally:
        requests.delete(f"{cluster.url}/v1/buckets/{b}?provider=ht", timeout=TIMEOUT)


def test_target_404_does_not_echo_the_query(cluster):
    sig = secrets.token_hex(16)
    t = cluster.smap()["targets"][0]
    r = requests.get("%s/v1/nothing/here?ft_exp=1&ft_sig=%s&%s" % (t["public_url"], sig, presigned_query(sig)),
                     timeout=TIMEOUT)
    assert r.status_code == 404, r.text
    assert "no such endpoint: GET /v1/nothing/here" in r.text, r.text
    assert_hidden(sig, r.text)


def test_s3_relay_failure_logs_no_cluster_signature(make_cluster):
    """With auth on, the proxy's URLs to a target carry an any-method signature (ft_sig): a failed relay logs the URL
    without it."""
    # no connect probes: the killed target stays in the map until the DELETE's relay finds it gone
    h = make_cluster(targets=1, mountpaths=1, auth=True, proxy_args=("--probe_interval_ms", "0"))
    s3 = s3util.client(h)
    b = unique("relaysig")
    s3.create_bucket(Bucket=b)
    s3.put_object(Bucket=b, Key="k", Body=b"x")
    h.kill_target(0)
    with pytest.raises(Exception):
        s3.delete_object(Bucket=b, Key="k")
    log = logs_text(h)
    assert "s3 DELETE /%s/k" % b in log, log[-3000:]
    assert not re.search(r"ft_sig=[0-9a-f]{16}", log), re.findall(r".*ft_sig=[0-9a-f].*", log)
    assert "ft_sig=***" in log, log[-3000:]  # the line is there, the signature is not


def test_etl_url_credentials_hidden_in_answers(cluster, api, origin):
    """A transformer URL with user:password@ and a token in its query: the registry's answers (POST, list, one, the
    public BMD) and a failing transform's error show it without them; the transformer still gets them; bmd.json,
    which keeps it whole, is the owner's only."""
    cluster.require_local("reads the nodes' logs")
    good, bad, b = unique("etlsig"), unique("etlsig"), unique("etlsig")
    host = origin.url[len("http://"):]
    r = api.s.post(api.url + "/v1/etl", json={"name": good, "url": "http://u:%s@%s/etl?token=%s" % (
        origin.sig, host, origin.sig)}, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    assert r.json()["url"] == "http://%s/etl?token=***" % host, r.text
    answers = [r.text]
    r = api.s.post(api.url + "/v1/etl", json={"name": bad, "url": "http://u:%s@%s/deny?token=%s" % (
        origin.sig, host, origin.sig)}, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    api.create_bucket(b)
    try:
        listed = api.s.get(api.url + "/v1/etl", timeout=TIMEOUT)
        one = api.s.get(api.url + "/v1/etl/" + good, timeout=TIMEOUT)
        bmd = api.s.get(api.url + "/v1/cluster?what=bmd", timeout=TIMEOUT)
        assert one.json()["url"] == "http://%s/etl?token=***" % host, one.text
        assert good in listed.text and good in bmd.text, (listed.text, bmd.text)
        answers += [listed.text, one.text, bmd.text]
        api.put(b, "o", b"abc")
        r = api.s.get("%s/v1/objects/%s/o?etl=%s" % (api.url, b, good), timeout=TIMEOUT)
        assert r.status_code == 200 and r.content == b"cba", r.text  # the stored URL kept its credentials
        r = api.s.get("%s/v1/objects/%s/o?etl=%s" % (api.url, b, bad), timeout=TIMEOUT)
        assert r.status_code == 502 and "http://%s/deny?token=***" % host in r.text, r.text
        answers.append(r.text)
        r = api.s.post("%s/v1/buckets/%s" % (api.url, b), timeout=TIMEOUT, json={
            "action": "copy-bck", "value": {"to": {"name": b + "-to"}, "etl": bad}})
        assert r.status_code == 200, r.text
        st = wait_job(api, r.json()["job_id"])
        assert st["errors"] == 1 and "/deny?token=***" in " ".join(st["error_samples"]), st
        answers += [str(st), api.s.get("%s/v1/jobs/%s" % (api.url, r.json()["job_id"]), timeout=TIMEOUT).text]
        assert_hidden(origin.sig, *answers, logs_text(cluster))
        # kept whole at rest, so the owner's only
        mode = os.stat(os.path.join(cluster.c.proxy.state_dir, "bmd.json")).st_mode
        assert mode & 0o077 == 0, oct(mode)
    finally:
        api.destroy_bucket(b + "-to", expect=None)
        api.destroy_bucket(b, expect=None)
        for name in (good, bad):
            api.s.delete(api.url + "/v1/etl/" + name, timeout=TIMEOUT)


def test_remote_endpoint_credentials_hidden_in_answers(cluster, api, origin):
    """An ht:// bucket whose endpoint holds user:password@ and a signed query: bucket listings, HEAD's props, the
    public BMD (native and AIStore's) show the endpoint without them."""
    b = unique("epsig")
    host = origin.url[len("http://"):]
    r = create_remote(cluster.url, b, "ht", {"endpoint": "http://u:%s@%s/moved?sig=%s" % (origin.sig, host, origin.sig)})
    try:
        answers = [r.text]
        head = api.s.head(f"{api.url}/v1/buckets/{b}?provider=ht", timeout=TIMEOUT)
        assert head.status_code == 200, head.headers
        props = head.headers["Ais-Bucket-Props"]
        assert '"endpoint":"http://%s/moved?sig=***"' % host in props, props
        for path in ("/v1/buckets", "/v1/buckets?provider=ht&presence=2", "/v1/cluster?what=bmd",
                     "/v1/daemon?what=bmd"):
            r = api.s.get(api.url + path, timeout=TIMEOUT)
            assert r.status_code == 200 and b in r.text, (path, r.text)
            answers.append(r.text)
        assert_hidden(origin.sig, props, *answers)
    finally:
        requests.delete(f"{cluster.url}/v1/buckets/{b}?provider=ht", timeout=TIMEOUT)


def test_bad_endpoint_with_credentials_is_named_without_them(cluster, api):
    """An aws endpoint with user:password@ is refused as bad: the refusal (on create or on a read) names it without
    them."""
    cluster.require_local("reads the nodes' logs")
    sig, b = secrets.token_hex(16), unique("badep")
    r = api.s.post(f"{api.url}/v1/buckets/{b}?provider=aws", timeout=TIMEOUT, json={
        "action": "create-bck", "value": {"backend": {"bucket": b, "endpoint": "http://AK:%s@127.0.0.1:1" % sig}}})
    try:
        answers = [r.text]
        if r.status_code == 200:
            g = requests.get(obj_url(cluster.url, b, "o", provider="aws"), timeout=TIMEOUT)
            assert g.status_code >= 400, g.text
            answers.append(g.text)
        assert any('bad endpoint \\"http://127.0.0.1:1\\"' in a for a in answers), answers  # in a JSON body
        assert_hidden(sig, *answers, logs_text(cluster))
    finally:
        requests.delete(f"{cluster.url}/v1/buckets/{b}?provider=aws", timeout=TIMEOUT)
