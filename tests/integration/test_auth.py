# SPDX-License-Identifier: Apache-2.0
# Authentication of the native API: tokens, roles, bucket grants, SigV4, signed redirects, target ports, curl -L.
import base64
import json
import os
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import s3util
from conftest import FT_BIN, module_cluster
from ftutil import Api, assert_json_error, session, unique

acluster = module_cluster("auth", "it starts a cluster with authentication on", targets=2, mountpaths=1,
                          auth=True)


def keys_file(h):
    return os.path.join(h.c.dir, "s3keys.json")


def token_for(h, access, secret, ttl=None, expect=200):
    body = {"access_key": access, "secret_key": secret}
    if ttl is not None:
        body["ttl"] = ttl
    r = session(token="").post(h.url + "/v1/tokens", json=body, timeout=30)
    assert r.status_code == expect, r.text
    return r.json()["token"] if expect == 200 else r


@pytest.fixture(scope="module")
def roles(acluster):
    """Adds a readonly key, a readwrite key and a key limited to one bucket to the identity store
    (restarting the proxy is not needed: it is read at start, so these tests restart it once)."""
    h = acluster
    with open(keys_file(h)) as f:
        doc = json.load(f)
    admin_ak = next(iter(doc))
    doc["RO"] = {"secret": "ro-secret-0123456789", "role": "readonly"}
    doc["RW"] = {"secret": "rw-secret-0123456789", "role": "readwrite"}
    doc["ONE"] = {"secret": "one-secret-012345678", "role": "readwrite", "buckets": ["granted"]}
    with open(keys_file(h), "w") as f:
        json.dump(doc, f)
    restart_proxy(h)
    return {"admin": h.token, "ro": token_for(h, "RO", "ro-secret-0123456789"),
            "rw": token_for(h, "RW", "rw-secret-0123456789"),
            "one": token_for(h, "ONE", "one-secret-012345678"), "admin_ak": admin_ak}


def restart_proxy(h):
    p = h.c.proxy
    p.signal(15)
    assert p.wait_dead(10)
    p.spawn(h.c.env)
    h.c.wait_ready(30)


def test_health_is_anonymous(acluster):
    r = session(token="").get(acluster.url + "/v1/health", timeout=30)
    assert r.status_code == 200


@pytest.mark.parametrize("method,path", [
    ("GET", "/v1/buckets/"), ("POST", "/v1/buckets/x"), ("DELETE", "/v1/buckets/x"),
    ("GET", "/v1/objects/x/y"), ("PUT", "/v1/objects/x/y"), ("GET", "/v1/cluster?what=smap"),
    ("GET", "/v1/jobs"), ("GET", "/v1/no-such-endpoint"), ("GET", "/metrics"), ("GET", "/v1/daemon"),
])
def test_no_credentials_is_401_json(acluster, method, path):
    r = session(token="").request(method, acluster.url + path, timeout=30, allow_redirects=False)
    assert_json_error(r, 401, "authentication required")
    assert r.headers.get("WWW-Authenticate", "").startswith("Bearer")


@pytest.mark.parametrize("authz,why", [
    ("Bearer abc", "malformed"),
    ("Bearer a.b.c", "malformed"),
    ("Basic dXNlcjpwYXNz", "unsupported Authorization scheme"),
])
def test_bad_credentials_are_401(acluster, authz, why):
    r = session(token="").get(acluster.url + "/v1/buckets/", headers={"Authorization": authz}, timeout=30)
    assert_json_error(r, 401, why)


def test_token_wrong_secret_and_bad_body(acluster):
    ak, _ = acluster.c.s3_keys()
    r = token_for(acluster, ak, "wrong", expect=401)
    assert_json_error(r, 401, "wrong access key or secret key")
    r = session(token="").post(acluster.url + "/v1/tokens", data=b"{not json", timeout=30)
    assert_json_error(r, 400, "access_key")
    r = token_for(acluster, ak, acluster.c.s3_keys()[1], ttl=10 ** 9, expect=400)
    assert_json_error(r, 400, "ttl")
    # GET is not in the endpoint table: default deny (admin), and an admin learns the method is wrong
    assert session(token="").get(acluster.url + "/v1/tokens", timeout=30).status_code == 401
    assert session(token=acluster.token).get(acluster.url + "/v1/tokens", timeout=30).status_code == 405


def test_expired_token_is_401(acluster):
    ak, sk = acluster.c.s3_keys()
    tok = token_for(acluster, ak, sk, ttl=1)
    time.sleep(2.1)
    r = session(token=tok).get(acluster.url + "/v1/buckets/", timeout=30)
    assert_json_error(r, 401, "expired")


def test_tampered_token_is_401(acluster):
    parts = acluster.token.split(".")
    import base64
    claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=="))
    claims["role"] = "admin"
    claims["sub"] = "someone-else"
    parts[1] = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    r = session(token=".".join(parts)).get(acluster.url + "/v1/buckets/", timeout=30)
    assert_json_error(r, 401, "signature")
    alg_none = base64.urlsafe_b64encode(b'{"alg":"none","typ":"JWT"}').decode().rstrip("=")
    r = session(token=alg_none + "." + parts[1] + ".").get(acluster.url + "/v1/buckets/", timeout=30)
    assert_json_error(r, 401, "HS256")


def test_native_flow_with_token(acluster):
    api = Api(acluster.url, token=acluster.token)
    b = unique("auth")
    api.create_bucket(b)
    api.put(b, "dir/a.txt", b"hello")
    assert api.get(b, "dir/a.txt").content == b"hello"
    assert [e["name"] for e in api.list_all(b)[0]] == ["dir/a.txt"]
    assert api.delete(b, "dir/a.txt").status_code == 200
    api.destroy_bucket(b)


def test_redirect_is_signed_and_bound(acluster):
    api = Api(acluster.url, token=acluster.token)
    b = unique("redir")
    api.create_bucket(b)
    api.put(b, "obj", b"data")
    s = session(token=acluster.token)
    r = s.get(acluster.url + "/v1/objects/%s/obj" % b, allow_redirects=False, timeout=30)
    assert r.status_code == 307
    loc = r.headers["Location"]
    assert "ft_sig=" in loc and "ft_exp=" in loc
    anon = session(token="")
    assert anon.get(loc, timeout=30).content == b"data"  # the URL is its own authorization
    # bound to the method: the GET URL does not allow a PUT or DELETE
    assert_json_error(anon.put(loc, data=b"evil", timeout=30), 401, "does not match")
    assert_json_error(anon.delete(loc, timeout=30), 401, "does not match")
    # bound to the object and bucket
    other = loc.replace("/obj?", "/obj2?")
    assert_json_error(anon.get(other, timeout=30), 401, "does not match")
    tampered = loc[:-1] + ("0" if loc[-1] != "0" else "1")
    assert_json_error(anon.get(tampered, timeout=30), 401, "does not match")
    # an expiry moved forward breaks the signature
    import re
    moved = re.sub(r"ft_exp=(\d+)", lambda m: "ft_exp=%d" % (int(m.group(1)) + 1000), loc)
    assert_json_error(anon.get(moved, timeout=30), 401, "does not match")
    api.delete(b, "obj")
    api.destroy_bucket(b)


def test_target_port_is_no_bypass(acluster):
    api = Api(acluster.url, token=acluster.token)
    b = unique("bypass")
    api.create_bucket(b)
    api.put(b, "secret-object", b"private")
    anon = session(token="")
    for t in acluster.c.targets:
        u = "%s/v1/objects/%s/secret-object" % (t.public_url, b)
        for m in ("GET", "HEAD", "PUT", "DELETE"):
            r = anon.request(m, u, data=b"x" if m == "PUT" else None, timeout=30, allow_redirects=False)
            assert r.status_code == 401, (m, u, r.status_code, r.text)
        # a token works on the target directly too
        r = session(token=acluster.token).get(u, timeout=30)
        assert r.status_code == 200 and r.content == b"private"
    api.delete(b, "secret-object")
    api.destroy_bucket(b)


def curl(*args):
    p = subprocess.run(["curl", "-sS", "--noproxy", "*", "-w", "\n%{http_code}"] + list(args),
                       capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    body, _, code = p.stdout.rpartition(b"\n")
    return int(code), body


def test_curl_follows_redirects_with_a_token(acluster):
    h = "Authorization: Bearer " + acluster.token
    b = unique("curl")
    code, _ = curl("-X", "POST", "-H", h, "-d", '{"action":"create-bck"}', acluster.url + "/v1/buckets/" + b)
    assert code == 200
    u = "%s/v1/objects/%s/hello.txt" % (acluster.url, b)
    code, body = curl("-L", "-X", "PUT", "-H", h, "--data-binary", "hello, FastTier", u)
    assert code == 200, body
    code, body = curl("-L", "-H", h, u)
    assert code == 200 and body == b"hello, FastTier"
    code, body = curl("-L", u)
    assert code == 401 and b"authentication required" in body
    code, _ = curl("-L", "-X", "DELETE", "-H", h, u)
    assert code == 200
    code, _ = curl("-X", "DELETE", "-H", h, acluster.url + "/v1/buckets/" + b)
    assert code == 200


def test_native_sigv4(acluster):
    """The native API takes SigV4 with the identity store's keys (s3util's own signer)."""
    ak, sk = acluster.c.s3_keys()
    url = acluster.url + "/v1/buckets/"
    hdrs = s3util.Signer(ak, sk).sign("GET", url, {}, s3util.EMPTY_SHA256)
    r = session(token="").get(url, headers=hdrs, timeout=30)
    assert r.status_code == 200, r.text
    bad = s3util.Signer(ak, "not-the-secret").sign("GET", url, {}, s3util.EMPTY_SHA256)
    assert_json_error(session(token="").get(url, headers=bad, timeout=30), 401)


def test_roles_and_bucket_grants(acluster, roles):
    h = acluster
    admin = Api(h.url, token=roles["admin"])
    for b in ("granted", "other"):
        admin.create_bucket(b)
    admin.put("other", "o", b"x")
    ro = session(token=roles["ro"])
    rw = session(token=roles["rw"])
    one = session(token=roles["one"])
    u = h.url + "/v1/objects/%s/%s"
    # readonly: reads yes, writes 403
    assert ro.get(u % ("other", "o"), timeout=30).content == b"x"
    assert_json_error(ro.put(u % ("other", "n"), data=b"y", timeout=30), 403, "needs role readwrite")
    assert_json_error(ro.post(h.url + "/v1/buckets/newb", json={"action": "create-bck"}, timeout=30), 403)
    # readwrite: writes yes, destroying a bucket 403 (admin)
    assert rw.put(u % ("other", "n"), data=b"y", timeout=30).status_code == 200
    assert_json_error(rw.delete(h.url + "/v1/buckets/other", timeout=30), 403, "needs role admin")
    # limited to one bucket
    assert one.put(u % ("granted", "g"), data=b"z", timeout=30).status_code == 200
    assert one.get(u % ("granted", "g"), timeout=30).content == b"z"
    assert_json_error(one.get(u % ("other", "o"), timeout=30), 403, "bucket other")
    assert_json_error(one.put(u % ("other", "o"), data=b"z", timeout=30), 403)
    # a token straight to the target obeys the same grants
    t0 = h.c.targets[0].public_url
    assert_json_error(one.get(t0 + "/v1/objects/other/o", timeout=30, allow_redirects=False), 403)
    # unknown endpoints need admin (default deny)
    assert_json_error(rw.get(h.url + "/v1/no-such-endpoint", timeout=30), 403, "needs role admin")
    assert admin.s.get(h.url + "/v1/no-such-endpoint", timeout=30).status_code == 404
    # S3 with the same store: the readonly key cannot write
    s3ro = s3util.client(h, access="RO", secret="ro-secret-0123456789")
    from botocore.exceptions import ClientError
    assert s3ro.get_object(Bucket="other", Key="o")["Body"].read() == b"x"
    with pytest.raises(ClientError) as e:
        s3ro.put_object(Bucket="other", Key="s3", Body=b"no")
    assert e.value.response["Error"]["Code"] == "AccessDenied"
    for b in ("granted", "other"):
        admin.destroy_bucket(b)


def test_object_copy_needs_write_on_the_destination(acluster, roles):
    """AIStore's object copy (PUT ?obj_to=) writes to its destination's bucket: the caller needs readwrite there,
    at the proxy and straight at a target; a signed redirect for a PUT of the source (or for a copy elsewhere)
    does not authorize a copy, the proxy's redirect for that copy does."""
    h = acluster
    admin = Api(h.url, token=roles["admin"])
    for b in ("granted", "other"):
        admin.create_bucket(b)
    one = session(token=roles["one"])
    admin.put("granted", "src", b"source bytes")
    u = h.url + "/v1/objects/granted/src?obj_to="
    assert_json_error(one.put(u + "ais/@%23/other/stolen", timeout=30), 403, "bucket other")
    r = one.put(u + "ais/@%23/granted/copy", timeout=30)
    assert r.status_code == 200, r.text
    assert one.get(h.url + "/v1/objects/granted/copy", timeout=30).content == b"source bytes"
    # the redirect of a plain PUT of the source, and of a copy into granted, with obj_to changed
    loc = one.put(h.url + "/v1/objects/granted/src", data=b"source bytes", allow_redirects=False,
                  timeout=30).headers["Location"]
    anon = session(token="")
    assert_json_error(anon.put(loc + "&obj_to=ais/@%23/other/stolen", timeout=30), 401, "does not match")
    loc = one.put(u + "ais/@%23/granted/copy2", allow_redirects=False, timeout=30).headers["Location"]
    assert_json_error(anon.put(loc.replace("granted/copy2", "other/stolen"), timeout=30), 401, "does not match")
    # a token straight to the source's owner
    owner = loc.split("/v1/")[0]
    assert_json_error(one.put(owner + "/v1/objects/granted/src?obj_to=ais/@%23/other/stolen", timeout=30,
                              allow_redirects=False), 403, "bucket other")
    r = one.put(owner + "/v1/objects/granted/src?obj_to=ais/@%23/granted/copy3", timeout=30, allow_redirects=False)
    assert r.status_code == 200, r.text
    assert admin.get("other", "stolen").status_code == 404
    for b in ("granted", "other"):
        admin.destroy_bucket(b)


def test_s3_boto3_flow_with_auth_on(acluster):
    s3 = s3util.client(acluster)
    b = s3util.bucket_name("auths3")
    s3.create_bucket(Bucket=b)
    s3.put_object(Bucket=b, Key="k", Body=b"v" * 100000)
    assert s3.get_object(Bucket=b, Key="k")["Body"].read() == b"v" * 100000
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=b)["Contents"]] == ["k"]
    s3.delete_object(Bucket=b, Key="k")
    s3.delete_bucket(Bucket=b)


def run_daemon(args, timeout=10):
    return subprocess.run([os.path.join(FT_BIN, "ft-proxy")] + args, capture_output=True, timeout=timeout)


def test_non_loopback_without_auth_refuses_to_start(tmp_path):
    p = run_daemon(["--bind", "0.0.0.0", "--public_port", "1", "--state_dir", str(tmp_path)])
    assert p.returncode != 0
    assert b"refusing to listen on 0.0.0.0 with authentication off" in p.stderr + p.stdout


def test_auth_without_secret_refuses_to_start(tmp_path):
    p = run_daemon(["--auth", "true", "--public_port", "1", "--state_dir", str(tmp_path)])
    assert p.returncode != 0
    assert b"cluster_secret" in p.stderr + p.stdout


def test_short_secret_refuses_to_start(tmp_path):
    sec = tmp_path / "s"
    sec.write_text("short")
    p = run_daemon(["--auth", "true", "--cluster_secret", str(sec), "--public_port", "1", "--state_dir",
                    str(tmp_path)])
    assert p.returncode != 0
    assert b"shorter than" in p.stderr + p.stdout and b"short\n" not in p.stderr


def test_anonymous_s3_with_auth_refuses_to_start(tmp_path):
    """Unsigned S3 requests would pass every role check: with auth on, s3_anonymous is refused (at start and by
    --check-config), pointing at allow_public_read."""
    sec = tmp_path / "s"
    sec.write_text("x" * 64)
    args = ["--auth", "true", "--cluster_secret", str(sec), "--s3_anonymous", "true", "--public_port", "1",
            "--state_dir", str(tmp_path)]
    for p in (run_daemon(args), run_daemon(args + ["--check-config"])):
        assert p.returncode != 0
        assert b"s3_anonymous: not with auth on" in p.stderr + p.stdout and b"allow_public_read" in p.stderr


def test_readable_secret_files_are_warned_about(tmp_path):
    """The cluster secret and the identity store hold secrets: either readable by others is named at start (not its
    content)."""
    sec, keys = tmp_path / "s", tmp_path / "keys.json"
    sec.write_text("x" * 64)
    keys.write_text('{"AK": "SECRETVALUE1"}')
    os.chmod(sec, 0o644)
    os.chmod(keys, 0o640)
    p = run_daemon(["--auth", "true", "--cluster_secret", str(sec), "--auth_keys", str(keys), "--public_port", "1",
                    "--state_dir", str(tmp_path), "--check-config"])
    out = p.stderr + p.stdout
    assert p.returncode == 0, out
    assert b"secret file %s is readable by group or others (mode 644)" % str(sec).encode() in out, out
    assert b"identity store %s is readable by group or others (mode 640)" % str(keys).encode() in out, out
    assert b"SECRETVALUE1" not in out and b"x" * 64 not in out
    os.chmod(sec, 0o600)
    os.chmod(keys, 0o600)
    p = run_daemon(["--auth", "true", "--cluster_secret", str(sec), "--auth_keys", str(keys), "--public_port", "1",
                    "--state_dir", str(tmp_path), "--check-config"])
    assert p.returncode == 0 and b"readable by group" not in p.stderr + p.stdout, p.stderr


def test_generated_key_files_are_private(tmp_path):
    """ft-cluster's key pair file is 0600, also over a readable temp file an interrupted start left."""
    (tmp_path / (ftcluster.S3_KEYS_FILE + ".tmp")).write_text("{}")
    os.chmod(tmp_path / (ftcluster.S3_KEYS_FILE + ".tmp"), 0o644)
    path, _, _ = ftcluster.ensure_s3_keys(str(tmp_path))
    assert os.stat(path).st_mode & 0o777 == 0o600, oct(os.stat(path).st_mode)


def test_insecure_flag_is_loud(tmp_path):
    proc = subprocess.Popen([os.path.join(FT_BIN, "ft-proxy"), "--bind", "0.0.0.0", "--insecure",
                             "--public_port", "0" if False else "47931", "--state_dir", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        time.sleep(1.0)
    finally:
        proc.terminate()
        out = proc.communicate(timeout=10)[0]
    assert b"INSECURE" in out


# ---- existing flows with auth on: a prefetch job, ft-loader ----
import peers  # noqa: E402
from ftutil import create_remote, wait_job  # noqa: E402

origin = peers.nginx_origin_fixture()


def test_target_metrics_and_batch_need_a_token(acluster, roles):
    """The targets' other public endpoints are no bypass either: /metrics and GetBatch need a token, and a
    batch (which may name any bucket) a key not limited to buckets."""
    api = Api(acluster.url, token=acluster.token)
    b = unique("tbatch")
    api.create_bucket(b)
    api.put(b, "o", b"batched")
    body = {"in": [{"bucket": b, "objname": "o"}], "format": ".tar"}
    for t in acluster.c.targets:
        assert_json_error(session(token="").get(t.public_url + "/metrics", timeout=30), 401, "authentication")
        assert session(token=roles["ro"]).get(t.public_url + "/metrics", timeout=30).status_code == 200
        assert_json_error(session(token="").post(t.public_url + "/v1/batch", json=body, timeout=30), 401,
                          "authentication")
        assert_json_error(session(token=roles["one"]).post(t.public_url + "/v1/batch", json=body, timeout=30), 403,
                          "every bucket")
    r = session(token=roles["ro"]).post(acluster.url + "/v1/batch", json=body, allow_redirects=False, timeout=30)
    assert r.status_code == 307, r.text
    got = session(token=roles["ro"]).post(r.headers["Location"], json=body, timeout=30)
    assert got.status_code == 200 and b"batched" in got.content, got.text
    api.delete(b, "o")
    api.destroy_bucket(b)


def test_copy_job_with_auth_on(acluster):
    """Targets send copied objects to the destination owners' public ports with a cluster token."""
    api = Api(acluster.url, token=acluster.token)
    src, dst = unique("csrc"), unique("cdst")
    api.create_bucket(src)
    names = ["k%d" % i for i in range(6)]
    for n in names:
        api.put(src, n, n.encode() * 100)
    s = session(token=acluster.token)
    r = s.post("%s/v1/buckets/%s" % (acluster.url, src),
               json={"action": "copy-bck", "value": {"to": {"name": dst, "provider": "ais"}}}, timeout=30)
    assert r.status_code == 200, r.text
    st = wait_job(acluster, r.json()["job_id"])
    assert st["state"] == "finished" and st.get("errors", 0) == 0, st
    for n in names:
        assert api.get(dst, n).content == n.encode() * 100


def test_prefetch_job_with_auth_on(acluster, origin):
    b = unique("authjob")
    create_remote(acluster.url, b, "ht", {"endpoint": origin.url}, token=acluster.token)
    names = ["%s-%d" % (b, i) for i in range(5)]
    for n in names:
        p = origin.root / n
        p.write_bytes(n.encode() * 10)
        p.chmod(0o644)
    s = session(token=acluster.token)
    u = "%s/v1/buckets/%s?provider=ht" % (acluster.url, b)
    assert_json_error(session(token="").post(u, json={"action": "prefetch-listrange",
                                                      "value": {"objnames": names}}, timeout=30), 401)
    r = s.post(u, json={"action": "prefetch-listrange", "value": {"objnames": names}}, timeout=30)
    assert r.status_code == 200, r.text
    st = wait_job(acluster, r.json()["job_id"])
    assert st["state"] == "finished", st
    got = s.get("%s/v1/objects/%s/%s?provider=ht" % (acluster.url, b, names[0]), timeout=30)
    assert got.status_code == 200 and got.content == names[0].encode() * 10
    assert s.delete(u, timeout=30).status_code == 200


def test_loader_picks_up_the_token(acluster, tmp_path):
    import urllib.parse
    b = unique("authload")
    Api(acluster.url, token=acluster.token).create_bucket(b)
    u = urllib.parse.urlsplit(acluster.url)
    base = [os.path.join(FT_BIN, "ft-loader"), "-ip", u.hostname, "-port", str(u.port), "-bucket", b,
            "-pctput", "100", "-maxputs", "20", "-minsize", "1KiB", "-maxsize", "1KiB", "-numworkers", "4"]
    env = {k: v for k, v in os.environ.items() if k not in ("FT_TOKEN", "FT_STATE_DIR")}
    p = subprocess.run(base, capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode != 0  # without a token every request is refused
    env["FT_STATE_DIR"] = acluster.c.dir
    for extra in ([], ["-direct"]):
        p = subprocess.run(base + extra, capture_output=True, text=True, timeout=120, env=env)
        assert p.returncode == 0, p.stdout + p.stderr
    names = [e["name"] for e in Api(acluster.url, token=acluster.token).list_all(b)[0]]
    assert len(names) == 40


# ---- control plane: every intra-cluster request signed with the cluster secret ----
import hashlib  # noqa: E402
import hmac  # noqa: E402
import secrets  # noqa: E402

import ftcluster  # noqa: E402


def signed(secret, method, target, body=b"", ts=None, nonce=None):
    key = hmac.new(secret.encode(), b"fasttier ctl v1", hashlib.sha256).digest()
    ts = str(int(time.time()) if ts is None else ts)
    nonce = nonce or secrets.token_hex(16)
    msg = "ft-ctl-v1\n%s\n%s\n%s\n%s\n%s" % (method, target, ts, nonce, hashlib.sha256(body).hexdigest())
    return {"Ft-Time": ts, "Ft-Nonce": nonce,
            "Ft-Signature": hmac.new(key, msg.encode(), hashlib.sha256).hexdigest()}


def log_text(h, name):
    with open(os.path.join(h.c.dir, "logs", name + ".log"), errors="replace") as f:
        return f.read()


def test_unsigned_join_is_refused_and_logged(acluster):
    ctl = acluster.c.proxy.control_url
    evil = {"id": "t-evil", "public_url": "http://127.0.0.1:1", "control_url": "http://127.0.0.1:2"}
    r = session(token=acluster.token).post(ctl + "/v1/cluster/join", json=evil, timeout=30)
    assert_json_error(r, 401, "unsigned request")
    body = json.dumps(evil).encode()
    wrong = signed("x" * 64, "POST", "/v1/cluster/join", body)
    r = session(token="").post(ctl + "/v1/cluster/join", data=body, headers=wrong, timeout=30)
    assert_json_error(r, 401, "bad signature")
    assert "t-evil" not in json.dumps(acluster.api.smap())
    assert "refused POST /v1/cluster/join from 127.0.0.1" in log_text(acluster, "proxy")


def test_replayed_and_stale_requests_are_refused(acluster):
    t = acluster.c.targets[0]
    secret = acluster.c.secret
    body = b"{}"
    h = signed(secret, "POST", "/v1/metasync", body)
    s = session(token="")
    hdr = dict(h, **{"Content-Type": "application/json"})
    r = s.post(t.control_url + "/v1/metasync", data=body, headers=hdr, timeout=30)
    assert r.status_code == 200, r.text
    r = s.post(t.control_url + "/v1/metasync", data=body, headers=hdr, timeout=30)
    assert_json_error(r, 401, "replayed")
    old = signed(secret, "POST", "/v1/metasync", body, ts=int(time.time()) - 600)
    r = s.post(t.control_url + "/v1/metasync", data=body, headers=old, timeout=30)
    assert_json_error(r, 401, "outside the window")
    # the body and the target are covered: a signature moved to another body or path fails
    r = s.post(t.control_url + "/v1/metasync", data=b'{"x":1}', headers=signed(secret, "POST", "/v1/metasync", body),
               timeout=30)
    assert_json_error(r, 401, "bad signature")
    r = s.post(t.control_url + "/v1/metasync?x=1", data=body,
               headers=signed(secret, "POST", "/v1/metasync", body), timeout=30)
    assert_json_error(r, 401, "bad signature")
    assert "replayed request" in log_text(acluster, "t0")


def test_a_join_with_the_secret_is_accepted(acluster):
    """The secret is what makes a member: the launcher's own signed probe goes through."""
    status, _ = ftcluster.http_json("POST", acluster.c.targets[0].control_url + "/v1/metasync", {},
                                    secret=acluster.c.secret)
    assert status == 200


def test_data_protection_traffic_is_signed(make_cluster):
    """EC slices and rebalance transfers go over signed control requests: a cluster with auth on
    writes an EC bucket, loses nothing when a target joins, and logs no refused request."""
    h = make_cluster(targets=3, mountpaths=1, auth=True)
    api = Api(h.url, token=h.token)
    b = unique("authec")
    api.create_bucket(b)
    r = api.s.post(h.url + "/v1/buckets/" + b, json={"action": "set-bprops", "value": {"ec": {
        "data_slices": 1, "parity_slices": 1, "objsize_limit": 0}}}, timeout=30)
    assert r.status_code == 200, r.text
    want = api.bmd()["version"]
    from ftutil import wait_until
    for t in h.c.targets:
        wait_until(lambda: ftcluster.http_json("POST", t.control_url + "/v1/metasync", {},
                                               secret=h.c.secret)[1]["bmd_version"] >= want, 10)
    data = {"o%d" % i: os.urandom(5000 + i) for i in range(30)}
    for n, d in data.items():
        api.put(b, n, d)
    slices = subprocess.run(["find", h.c.dir, "-path", "*/.ec/*", "-type", "f"], capture_output=True,
                            text=True).stdout.split()
    assert len(slices) >= 30, "EC slices or replicas were not stored on the holders"
    h.add_target(mountpaths=1)
    for n, d in data.items():
        assert api.get(b, n).content == d
    for name in ["proxy"] + ["t%d" % i for i in range(4)]:
        assert "ctl: refused" not in log_text(h, name), name


# ---- backend secrets: never on a public port, in a log or an error; sealed in the BMD ----
def test_planted_backend_secret_never_leaks(acluster):
    import boto3
    from botocore.config import Config
    peers.ensure_installed()
    p = peers.start_s3rver(peers.scratch_dir())
    planted = "PLANTED-" + secrets.token_hex(12)
    wrong = "WRONG-" + secrets.token_hex(12)
    answers = []
    s = session(token=acluster.token)

    def keep(r):
        answers.append(r.text + json.dumps(dict(r.headers)))
        return r

    try:
        s3 = boto3.client("s3", endpoint_url=p.url, aws_access_key_id="S3RVER", aws_secret_access_key="S3RVER",
                          region_name="us-east-1", config=Config(s3={"addressing_style": "path"}))
        s3.put_object(Bucket=p.bucket, Key="k/one", Body=b"remote-bytes")
        good, bad = unique("sec"), unique("secbad")
        # good: the real key pair plus a planted session token (signed along, ignored by s3rver)
        backend = {"bucket": p.bucket, "endpoint": p.url, "addressing": "path", "region": "us-east-1",
                   "access_key": "S3RVER", "secret_key": "S3RVER", "session_token": planted}
        keep(create_remote(acluster.url, good, "aws", backend, token=acluster.token))
        # bad: a planted wrong secret key: every backend call fails, and its errors must not quote it
        keep(create_remote(acluster.url, bad, "aws", dict(backend, access_key="NOPE", secret_key=wrong,
                                                          session_token=wrong), token=acluster.token))
        u = acluster.url
        r = keep(s.get("%s/v1/objects/%s/k/one?provider=aws" % (u, good), timeout=30))
        assert r.status_code == 200 and r.content == b"remote-bytes", r.text
        keep(s.put("%s/v1/objects/%s/k/two?provider=aws" % (u, good), data=b"written-through", timeout=30))
        keep(s.get("%s/v1/buckets/%s?provider=aws" % (u, good), timeout=30))
        keep(s.head("%s/v1/buckets/%s?provider=aws" % (u, good), timeout=30))
        keep(s.get("%s/v1/objects/%s/k/one?provider=aws" % (u, bad), timeout=30))
        keep(s.put("%s/v1/objects/%s/k/x?provider=aws" % (u, bad), data=b"x", timeout=30))
        keep(s.get("%s/v1/buckets/%s?provider=aws" % (u, bad), timeout=30))
        r = keep(s.post("%s/v1/buckets/%s?provider=aws" % (u, bad), timeout=30,
                        json={"action": "prefetch-listrange", "value": {"objnames": ["k/one"]}}))
        if r.status_code == 200:
            keep(s.get("%s/v1/jobs/%s" % (u, wait_job(acluster, r.json()["job_id"])["id"]), timeout=30))
        bmd = keep(s.get(u + "/v1/cluster?what=bmd", timeout=30)).json()
        names = {b["name"]: b for b in bmd["buckets"]}
        assert "secret_key" not in names[good].get("backend", {}) and "session_token" not in names[good]["backend"]
        keep(s.get(u + "/v1/buckets/", timeout=30))
        for t in acluster.c.targets:  # the targets' public ports
            keep(s.get("%s/v1/objects/%s/k/one?provider=aws" % (t.public_url, bad), timeout=30,
                       allow_redirects=False))
        # at rest: sealed in bmd.json, and still opens after a restart
        with open(os.path.join(acluster.c.proxy.state_dir, "bmd.json")) as f:
            at_rest = f.read()
        assert "enc:v1:" in at_rest
        restart_proxy(acluster)
        r = keep(s.get("%s/v1/objects/%s/k/two?provider=aws" % (u, good), timeout=30))
        assert r.status_code == 200 and r.content == b"written-through", r.text
        for sec in (planted, wrong):
            for a in answers:
                assert sec not in a, a[:500]
            assert sec not in at_rest
            for name in os.listdir(os.path.join(acluster.c.dir, "logs")):
                with open(os.path.join(acluster.c.dir, "logs", name), errors="replace") as f:
                    assert sec not in f.read(), "secret in log " + name
            for node in acluster.c.nodes:  # no state file of any node holds it in clear
                for root, _, files in os.walk(node.state_dir):
                    for fn in files:
                        if fn.endswith(".json"):
                            with open(os.path.join(root, fn), errors="replace") as f:
                                assert sec not in f.read(), os.path.join(root, fn)
        for b in (good, bad):
            s.delete("%s/v1/buckets/%s?provider=aws" % (u, b), timeout=30)
    finally:
        p.stop()


def test_anonymous_metrics_opens_metrics_and_daemon_only(make_cluster):
    """auth_anonymous_metrics lets a scraper without credentials read /metrics and /v1/daemon, of the proxy and
    of a target's own port; every other endpoint still asks for a token, and the answers hold no secret."""
    opt = ["--auth_anonymous_metrics", "true"]
    h = make_cluster(targets=1, mountpaths=1, auth=True, proxy_args=opt, target_args=opt)
    b = unique("am")
    assert session(token=h.token).post(h.url + "/v1/buckets/" + b, json={"action": "create-bck"},
                                       timeout=30).status_code == 200
    anon = session(token="")
    tgt = h.c.targets[0].public_url
    for base in (h.url, tgt):
        r = anon.get(base + "/metrics", timeout=30)
        assert r.status_code == 200 and "# TYPE " in r.text, (base, r.status_code, r.text[:200])
        assert anon.head(base + "/metrics", timeout=30).status_code == 200
        assert h.token not in r.text
    r = anon.get(h.url + "/v1/daemon?what=smap", timeout=30)
    assert r.status_code == 200 and r.json(), r.text[:200]
    assert h.token not in r.text
    secret = h.c.secret if isinstance(h.c.secret, str) else h.c.secret.decode()
    for base in (h.url, tgt):
        assert secret not in anon.get(base + "/metrics", timeout=30).text
    for method, base, path in [("GET", h.url, "/v1/buckets/"), ("GET", h.url, "/v1/objects/%s/o" % b),
                               ("PUT", h.url, "/v1/objects/%s/o" % b), ("DELETE", h.url, "/v1/buckets/" + b),
                               ("GET", h.url, "/v1/cluster?what=smap"), ("GET", h.url, "/v1/jobs"),
                               ("POST", h.url, "/v1/daemon"), ("GET", tgt, "/v1/objects/%s/o" % b),
                               ("PUT", tgt, "/v1/objects/%s/o" % b), ("POST", tgt, "/v1/batch")]:
        r = anon.request(method, base + path, data=b"x" if method in ("PUT", "POST") else None, timeout=30,
                         allow_redirects=False)
        assert_json_error(r, 401)
    assert session(token=h.token).get(h.url + "/v1/buckets/" + b, timeout=30).status_code == 200


def test_transformer_url_sealed_at_rest_and_in_flight(acluster):
    """A transformer URL with user:password@ and a token: bmd.json (and so every metasync push) holds it sealed, the
    targets open it (the transformer gets its credentials), a restarted proxy opens it again."""
    sig = "SIG" + unique("x").replace("-", "")

    class Reverse(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            ok = (self.path == "/etl?token=" + sig and
                  self.headers.get("Authorization") == "Basic " + base64.b64encode(("u:" + sig).encode()).decode())
            self.send_response(200 if ok else 403)
            self.send_header("Content-Length", str(len(body) if ok else 0))
            self.end_headers()
            if ok:
                self.wfile.write(body[::-1])

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Reverse)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    api, name, b = Api(acluster.url, token=acluster.token), unique("sealetl"), unique("sealetl")
    try:
        r = api.s.post(acluster.url + "/v1/etl", timeout=30, json={
            "name": name, "url": "http://u:%s@127.0.0.1:%d/etl?token=%s" % (sig, srv.server_address[1], sig)})
        assert r.status_code == 200, r.text
        api.create_bucket(b)
        api.put(b, "o", b"abc")
        for restarted in (False, True):
            if restarted:
                restart_proxy(acluster)
            r = api.s.get("%s/v1/objects/%s/o?etl=%s" % (acluster.url, b, name), timeout=30)
            assert r.status_code == 200 and r.content == b"cba", (restarted, r.text)
            with open(os.path.join(acluster.c.proxy.state_dir, "bmd.json")) as f:
                at_rest = f.read()
            assert sig not in at_rest and "enc:v1:" in at_rest, at_rest
        assert "token=***" in api.s.get(acluster.url + "/v1/etl/" + name, timeout=30).text
    finally:
        api.s.delete(acluster.url + "/v1/etl/" + name, timeout=30)
        api.destroy_bucket(b, expect=None)
        srv.shutdown()
        srv.server_close()
