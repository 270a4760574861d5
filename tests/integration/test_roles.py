# SPDX-License-Identifier: Apache-2.0
# With authentication on, every endpoint of every port refuses callers below the role it documents.
import hashlib
import json
import socket
import xml.etree.ElementTree as ET

import pytest

import ftcluster
import s3util
from conftest import module_cluster
from ftutil import Api, add_keys, recv_until_closed, session, unique

rcluster = module_cluster("roles", "it starts a cluster with authentication on and adds keys", targets=2,
                          mountpaths=1, auth=True)

ROLES = ("none", "readonly", "readwrite", "admin")
KEYS = {"readonly": ("ROLE-RO", "ro-secret-0123456789abcdef"),
        "readwrite": ("ROLE-RW", "rw-secret-0123456789abcdef")}
LIMITED = ("ROLE-ONE", "one-secret-0123456789abcdef")  # readwrite on two buckets only


@pytest.fixture(scope="module")
def ctx(rcluster):
    """A readonly, a readwrite and a bucket-limited key in the identity store, their tokens, and a bucket with
    one object (plus another the limited key has no grant on)."""
    h = rcluster
    b, granted = unique("roles"), unique("granted")
    keys = {ak: {"secret": sk, "role": role} for role, (ak, sk) in KEYS.items()}
    keys[LIMITED[0]] = {"secret": LIMITED[1], "role": "readwrite", "buckets": [b, granted]}
    tokens = add_keys(h, keys)
    c = {"tokens": {"none": "", "admin": h.token, "limited": tokens[LIMITED[0]]},
         "s3keys": {"admin": h.c.s3_keys(), **KEYS}, "b": b, "granted": granted, "other": unique("other")}
    for role, (ak, _) in KEYS.items():
        c["tokens"][role] = tokens[ak]
    api = Api(h.url, token=h.token)
    api.create_bucket(c["b"])
    api.put(c["b"], "o", b"object data")
    api.create_bucket(c["other"])
    api.put(c["other"], "secret", b"not for the limited key")
    c["tid"] = h.targets()[0]["id"]
    c["unix"] = h.targets()[0].get("public_unix")
    return c


# ---- the tables: (method, path, body, role the docs give it) ----
# Path fields: {b} the bucket with object "o", {new} a fresh name, {tmp} a fresh bucket (made by
# the admin before the request), {tid} a target's id.
BATCH = {"in": [{"bucket": "{b}", "objname": "o"}], "format": ".tar"}
MOSS = {"in": [{"objname": "o"}], "strm": True}

PROXY = [
    ("GET", "/v1/health", None, "none"),
    ("POST", "/v1/tokens", {"access_key": "x"}, "none"),
    # buckets
    ("GET", "/v1/buckets", None, "readonly"),
    ("HEAD", "/v1/buckets/{b}", None, "readonly"),
    ("GET", "/v1/buckets/{b}?prefix=o&pagesize=10", None, "readonly"),
    ("GET", "/v1/buckets/{b}", {"action": "list", "value": {"prefix": ""}}, "readonly"),
    ("POST", "/v1/buckets/{new}", {"action": "create-bck"}, "readwrite"),
    ("POST", "/v1/buckets/{b}", {"action": "set-bprops", "value": {"checksum": {"type": "xxhash"}}}, "readwrite"),
    ("POST", "/v1/buckets/{b}", {"action": "copy-bck", "value": {"to": {"name": "{new}"}}}, "readwrite"),
    ("POST", "/v1/buckets/{b}?bck_to=ais/@%23/{new}/", {"action": "copy-bck", "value": {}}, "readwrite"),
    ("POST", "/v1/buckets", {"action": "create-bck"}, "readwrite"),
    ("DELETE", "/v1/buckets/{tmp}", None, "admin"),
    ("DELETE", "/v1/buckets", None, "admin"),
    ("PUT", "/v1/buckets/{b}", {"action": "archive", "value": {"objnames": ["o"], "archname": "{new}.tar"}},
     "readwrite"),
    ("PUT", "/v1/buckets/{b}", {"action": "set-bprops"}, "readwrite"),  # 405 past the role check
    # objects
    ("GET", "/v1/objects/{b}/o", None, "readonly"),
    ("HEAD", "/v1/objects/{b}/o", None, "readonly"),
    ("PUT", "/v1/objects/{b}/{new}", b"new data", "readwrite"),
    ("DELETE", "/v1/objects/{b}/{new}", None, "readwrite"),
    ("POST", "/v1/objects/{b}/{new}", {"action": "mpt-upload"}, "readwrite"),
    # jobs
    ("GET", "/v1/jobs", None, "readonly"),
    ("GET", "/v1/jobs/no-such-job", None, "readonly"),
    ("DELETE", "/v1/jobs/no-such-job", None, "readwrite"),
    ("DELETE", "/v1/jobs?kind=copy-bck", None, "readwrite"),
    # cluster map, AIStore's documents and job queries
    ("GET", "/v1/cluster?what=smap", None, "readonly"),
    ("GET", "/v1/cluster?what=bmd", None, "readonly"),
    ("GET", "/v1/cluster?what=status", None, "readonly"),
    ("GET", "/v1/daemon?what=smap", None, "readonly"),
    ("GET", "/v1/daemon?what=bmd", None, "readonly"),
    ("GET", "/metrics", None, "readonly"),
    ("HEAD", "/metrics", None, "readonly"),
    # membership, maintenance, cluster-wide jobs, mountpaths
    ("PUT", "/v1/cluster", {"action": "start-maintenance", "value": {"sid": "no-such-node"}}, "admin"),
    ("PUT", "/v1/cluster", {"action": "stop-maintenance", "value": {"sid": "no-such-node"}}, "admin"),
    ("PUT", "/v1/cluster", {"action": "decommission", "value": {"sid": "no-such-node"}}, "admin"),
    ("PUT", "/v1/cluster", {"action": "stop", "value": {"kind": "copy-bck"}}, "admin"),
    ("POST", "/v1/cluster", {"action": "join"}, "admin"),
    ("POST", "/v1/cluster/join", {"id": "t-evil"}, "admin"),
    ("GET", "/v1/cluster/mountpaths?sid={tid}", None, "admin"),
    ("POST", "/v1/cluster/mountpaths?sid={tid}", {"action": "attach", "path": "/no/such/mountpath"}, "admin"),
    # ETL
    ("GET", "/v1/etl", None, "readonly"),
    ("GET", "/v1/etl/no-such-etl", None, "readonly"),
    ("POST", "/v1/etl", {"name": "{new}", "command": ["cat"]}, "admin"),
    ("DELETE", "/v1/etl/no-such-etl", None, "admin"),
    # GetBatch
    ("POST", "/v1/batch", BATCH, "readonly"),
    ("GET", "/v1/ml/moss/{b}", MOSS, "readonly"),
    # default deny
    ("GET", "/v1/tokens", None, "admin"),
    ("GET", "/v1/no-such-endpoint", None, "admin"),
]

# A target's public port (and its Unix socket): what the proxy would have redirected, sent directly.
TARGET = [
    ("GET", "/v1/health", None, "none"),
    ("GET", "/metrics", None, "readonly"),
    ("POST", "/v1/batch", BATCH, "readonly"),
    ("GET", "/v1/ml/moss/{b}", MOSS, "readonly"),
    ("GET", "/v1/objects/{b}/o", None, "readonly"),
    ("HEAD", "/v1/objects/{b}/o", None, "readonly"),
    ("PUT", "/v1/objects/{b}/{new}", b"direct", "readwrite"),
    ("DELETE", "/v1/objects/{b}/{new}", None, "readwrite"),
    ("POST", "/v1/objects/{b}/{new}?mpu=create", None, "readwrite"),
    ("PUT", "/v1/ec/slice?bucket={b}&obj=o", b"slice", "signed"),
]

# /s3: "none" is an unsigned request, a role is a SigV4 signature with a key of that role.
S3 = [
    ("GET", "/s3/", None, "readonly"),
    ("HEAD", "/s3/{b}", None, "readonly"),
    ("GET", "/s3/{b}?list-type=2&prefix=o", None, "readonly"),
    ("GET", "/s3/{b}?location", None, "readonly"),
    ("GET", "/s3/{b}?acl", None, "readonly"),
    ("GET", "/s3/{b}/o", None, "readonly"),
    ("HEAD", "/s3/{b}/o", None, "readonly"),
    ("PUT", "/s3/{new}", b"", "readwrite"),
    ("PUT", "/s3/{b}/{new}", b"s3 data", "readwrite"),
    ("PUT", "/s3/{b}/{new}", {"x-amz-copy-source": "/{b}/o"}, "readwrite"),
    ("DELETE", "/s3/{b}/{new}", None, "readwrite"),
    ("POST", "/s3/{b}?delete", b"<Delete><Object><Key>{new}</Key></Object></Delete>", "readwrite"),
    ("POST", "/s3/{b}/{new}?uploads", b"", "readwrite"),
    ("DELETE", "/s3/{tmp}", None, "admin"),
    ("DELETE", "/s3/{b}?tagging", None, "readwrite"),  # a configuration write, as PutBucketTagging
    ("DELETE", "/s3/{b}?policy", None, "readwrite"),
    ("GET", "/s3/{b}/o?tagging", None, "readonly"),
    ("DELETE", "/s3/{b}/o?tagging", None, "readwrite"),  # as PutObjectTagging
    ("DELETE", "/s3/{tmp}?nonsense", None, "admin"),  # no subresource: DeleteBucket, whatever the query
]

# Control ports: every route, unsigned (with or without an admin token), must be refused.
PROXY_CTL = [
    ("POST", "/v1/cluster/join", {"id": "t-evil", "public_url": "http://127.0.0.1:1",
                                  "control_url": "http://127.0.0.1:2"}),
    ("POST", "/v1/cluster/keepalive", {"id": "{tid}"}),
    ("GET", "/v1/cluster?what=bmd", None),
    ("PUT", "/v1/cluster", {"action": "start-maintenance", "value": {"sid": "{tid}"}}),
    ("POST", "/v1/metasync", {}),
    ("GET", "/v1/meta", None),
    ("POST", "/v1/meta", {"op": "setprops"}),
    ("GET", "/v1/cluster/mountpaths?sid={tid}", None),
    ("GET", "/v1/health", None),
]
TARGET_CTL = [
    ("GET", "/v1/health", None),
    ("POST", "/v1/metasync", {}),
    ("GET", "/v1/list?bucket={b}", None),
    ("GET", "/v1/buckets", None),
    ("GET", "/v1/jobs", None),
    ("POST", "/v1/jobs", {"id": "x", "kind": "evict-bucket", "provider": "ais", "bucket": "{b}"}),
    ("DELETE", "/v1/jobs/x", None),
    ("GET", "/v1/ec/held", None),
    ("GET", "/v1/ec/slice?bucket={b}&obj=o", None),
    ("POST", "/v1/ec/encode", {}),
    ("GET", "/v1/ec/meta?bucket={b}&obj=o", None),
    ("POST", "/v1/rebalance", {}),
    ("GET", "/v1/rebalance/obj?bucket={b}&obj=o", None),
    ("POST", "/v1/rebalance/send", {}),
    ("POST", "/v1/rebalance/pull", {}),
    ("GET", "/v1/mountpaths", None),
    ("POST", "/v1/mountpaths", {"action": "detach", "path": "/"}),
    ("POST", "/v1/hints", {}),
    ("GET", "/v1/daemon", None),
    ("POST", "/v1/mpu", {}),
]


def _fill(s, f):
    for k, v in f.items():
        s = s.replace("{%s}" % k, v)
    return s


def fields(h, c, path):
    """The values of the path's fields; {tmp} is a bucket the admin makes now."""
    f = {"b": c["b"], "new": unique("new"), "tid": c["tid"]}
    if "{tmp}" in path:
        f["tmp"] = unique("tmp")
        Api(h.url, token=h.token).create_bucket(f["tmp"])
    return f


def encode(body, f):
    if body is None:
        return None
    if isinstance(body, bytes):
        return _fill(body.decode(), f).encode()
    return _fill(json.dumps(body), f).encode()


def refused_native(r, role, where):
    """A refusal of the native API: 401 without credentials, 403 with a role too low; a JSON error."""
    want = 401 if role == "none" else 403
    assert r.status_code == want, "%s by %s: want %d, got %d: %r" % (where, role, want, r.status_code, r.content[:300])
    if r.request.method != "HEAD":
        assert r.headers.get("Content-Type", "").startswith("application/json"), (where, r.headers)
        j = json.loads(r.content)
        assert j["status"] == want and j["message"], (where, j)


def accepted(r, role, where):
    assert r.status_code not in (401, 403) and r.status_code < 500, \
        "%s by %s: got %d: %r" % (where, role, r.status_code, r.content[:300])


def below(need):
    return ROLES[:ROLES.index(need)]


def walk(h, c, base, method, path, body, need, send):
    """Sends the request as every caller below need (refused) and as need (accepted); need "signed" (an
    intra-cluster route): every caller, whatever its token, is refused as unauthenticated (401)."""
    for role in ROLES if need == "signed" else below(need) + (need,):
        f = fields(h, c, path)
        p = _fill(path, f)
        where = "%s %s%s" % (method, base, p)
        r = send(role, method, base + p, encode(body, f))
        if role == need:
            accepted(r, role, where)
        else:
            refused_native(r, "none" if need == "signed" else role, where)


def native_send(c):
    def send(role, method, url, data):
        hdrs = {"Content-Type": "application/json"} if data else {}
        return session(token=c["tokens"][role]).request(method, url, data=data, headers=hdrs, timeout=30,
                                                        allow_redirects=False)
    return send


@pytest.mark.parametrize("method,path,body,need", PROXY, ids=["%s %s" % (m, p) for m, p, _, _ in PROXY])
def test_proxy_public_port(rcluster, ctx, method, path, body, need):
    walk(rcluster, ctx, rcluster.url, method, path, body, need, native_send(ctx))


@pytest.mark.parametrize("method,path,body,need", TARGET, ids=["%s %s" % (m, p) for m, p, _, _ in TARGET])
def test_target_public_port(rcluster, ctx, method, path, body, need):
    """A client that goes around the proxy: a target's TCP port."""
    walk(rcluster, ctx, rcluster.c.targets[0].public_url, method, path, body, need, native_send(ctx))


class RawResponse:
    def __init__(self, data, method):
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.status_code = int(lines[0].split()[1])
        self.headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            self.headers[k.strip()] = v.strip()
        self.content = body
        self.request = type("Req", (), {"method": method})


def unix_request(path, token, method, target, data):
    """One plain HTTP/1.1 request on the Unix socket at path."""
    head = "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %d\r\n" % (method, target,
                                                                                       len(data or b""))
    if data:
        head += "Content-Type: application/json\r\n"
    if token:
        head += "Authorization: Bearer %s\r\n" % token
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(path)
        s.sendall(head.encode() + b"\r\n" + (data or b""))
        if method == "HEAD":
            s.shutdown(socket.SHUT_WR)
        return RawResponse(recv_until_closed(s), method)


@pytest.mark.parametrize("method,path,body,need", TARGET, ids=["%s %s" % (m, p) for m, p, _, _ in TARGET])
def test_target_unix_socket(rcluster, ctx, method, path, body, need):
    """The same handler as the TCP port, on the target's Unix socket."""
    assert ctx["unix"], "the target advertises no Unix socket (public_unix is on by default)"

    def send(role, m, target, data):
        return unix_request(ctx["unix"], ctx["tokens"][role], m, target, data)

    walk(rcluster, ctx, "", method, path, body, need, send)


def refused_s3(r, where, role):
    assert r.status_code in (401, 403), "%s by %s: got %d: %r" % (where, role, r.status_code, r.content[:300])
    if r.request.method != "HEAD":
        assert r.headers.get("Content-Type", "").startswith("application/xml"), (where, r.headers)
        assert ET.fromstring(r.content).tag == "Error", (where, r.content)


@pytest.mark.parametrize("method,path,body,need", S3, ids=["%s %s" % (m, p) for m, p, _, _ in S3])
def test_s3(rcluster, ctx, method, path, body, need):
    h = rcluster
    for role in below(need) + (need,):
        f = fields(h, ctx, path)
        url = h.url + _fill(path, f)
        hdrs, data = {}, b""
        if isinstance(body, dict):
            hdrs = {k: _fill(v, f) for k, v in body.items()}
        elif body is not None:
            data = _fill(body.decode(), f).encode()
        if method == "POST" and "delete" in path:
            import base64
            hdrs["Content-MD5"] = base64.b64encode(hashlib.md5(data).digest()).decode()
        if role != "none":
            ak, sk = ctx["s3keys"][role]
            hdrs = s3util.Signer(ak, sk).sign(method, url, hdrs, hashlib.sha256(data).hexdigest())
        r = session(token="").request(method, url, data=data, headers=hdrs, timeout=30, allow_redirects=False)
        where = "%s %s" % (method, url)
        if role == need:
            accepted(r, role, where)
        else:
            refused_s3(r, where, role)


def ctl_cases(rows, kind):
    return [pytest.param(kind, m, p, b, id="%s %s %s" % (kind, m, p)) for m, p, b in rows]


@pytest.mark.parametrize("node,method,path,body", ctl_cases(PROXY_CTL, "proxy") + ctl_cases(TARGET_CTL, "target"))
def test_control_port_needs_a_signature(rcluster, ctx, node, method, path, body):
    """Intra-cluster routes: refused unsigned, whatever token comes along; a member's signature is let in."""
    h = rcluster
    n = h.c.proxy if node == "proxy" else h.c.targets[0]
    f = fields(h, ctx, path)
    p = _fill(path, f)
    data = encode(body, f)
    for role in ROLES:
        r = session(token=ctx["tokens"][role]).request(method, n.control_url + p, data=data, timeout=30,
                                                      allow_redirects=False)
        refused_native(r, "none", "%s %s%s with %s token" % (method, n.control_url, p, role))
    if method == "GET" and path == "/v1/health":
        r = session(token="").get(n.control_url + p, headers=ftcluster.ctl_headers(h.c.secret, "GET", p),
                                  timeout=30)
        assert r.status_code == 200, r.text


def test_aistore_multipart_upload_with_a_readwrite_token(rcluster, ctx):
    """AIStore's multipart upload at the proxy: the proxy's calls to the owner and a part's redirect carry the
    cluster's signature, so a readwrite token goes through every step (the part's redirect followed without
    the token, as clients do across ports); a readonly token is refused at each."""
    h, b, name = rcluster, ctx["b"], unique("mpu")
    u = "%s/v1/objects/%s/%s" % (h.url, b, name)
    rw, ro = session(token=ctx["tokens"]["readwrite"]), session(token=ctx["tokens"]["readonly"])
    refused_native(ro.post(u, json={"action": "mpt-upload"}, timeout=30), "readonly", "mpt-upload")
    r = rw.post(u, json={"action": "mpt-upload"}, timeout=30)
    assert r.status_code == 200, r.text
    upload = r.text
    q = "?uploadId=%s&partNumber=1" % upload
    refused_native(ro.put(u + q, data=b"part", timeout=30, allow_redirects=False), "readonly", "part")
    r = rw.put(u + q, data=b"part one", timeout=30, allow_redirects=False)
    assert r.status_code == 307 and "ft_sig=" in r.headers["Location"], (r.status_code, r.headers)
    assert session(token="").put(r.headers["Location"], data=b"part one", timeout=30).status_code == 200
    done = {"action": "mpt-complete", "value": [{"part-number": 1, "etag": ""}]}
    refused_native(ro.post(u + "?uploadId=" + upload, json=done, timeout=30), "readonly", "mpt-complete")
    r = rw.post(u + "?uploadId=" + upload, json=done, timeout=30)
    assert r.status_code == 200, r.text
    assert rw.get(u, timeout=30).content == b"part one"
    r = rw.post(u, json={"action": "mpt-upload"}, timeout=30)
    assert r.status_code == 200, r.text
    refused_native(ro.delete(u + "?uploadId=" + r.text, timeout=30), "readonly", "mpt-abort")
    assert rw.delete(u + "?uploadId=" + r.text, timeout=30).status_code == 200


def test_a_second_bucket_in_the_request_needs_its_grant_too(rcluster, ctx):
    """A key limited to buckets reads and writes no other bucket through a request on one of its own: a copy's,
    an archive's or dsort's destination needs readwrite on it, an S3 copy's source readonly."""
    h, b, other = rcluster, ctx["b"], ctx["other"]
    one = session(token=ctx["tokens"]["limited"])
    u = h.url + "/v1/buckets/" + b
    for body in ({"action": "copy-bck", "value": {"to": {"name": other}}},
                 {"action": "copy-bck", "value": {"to": {"name": unique("fresh")}}},
                 {"action": "archive", "value": {"objnames": ["o"], "to_bucket": other, "archname": "a.tar"}},
                 {"action": "dsort", "value": {"prefix": "o", "to": {"name": other},
                                               "output_template": "out-{0..9}.tar", "shard_size": 1024}}):
        refused_native(one.post(u, json=body, timeout=30), "limited", json.dumps(body))
    refused_native(one.post(u + "?bck_to=ais/@%23/" + other + "/", json={"action": "copy-bck", "value": {}},
                            timeout=30), "limited", "bck_to")
    r = one.post(u, json={"action": "copy-bck", "value": {"to": {"name": ctx["granted"]}}}, timeout=30)
    assert r.status_code == 200, r.text
    # S3 CopyObject (and UploadPartCopy) into its own bucket from one it may not read
    ak, sk = LIMITED
    for src, want in (("/%s/secret" % other, 403), ("/%s/o" % b, 200)):
        url = "%s/s3/%s/%s" % (h.url, b, unique("copy"))
        hdrs = s3util.Signer(ak, sk).sign("PUT", url, {"x-amz-copy-source": src}, s3util.EMPTY_SHA256)
        r = session(token="").put(url, headers=hdrs, timeout=30)
        assert r.status_code == want, (src, r.status_code, r.text)
        if want == 403:
            assert s3util.xml_error(r)[0] == "AccessDenied"
    assert Api(h.url, token=h.token).get(other, "secret").content == b"not for the limited key"
