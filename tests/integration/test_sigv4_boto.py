# SPDX-License-Identifier: Apache-2.0
# SigV4 against botocore: requests botocore signs (client API, SigV4Auth, S3SigV4Auth, S3SigV4QueryAuth) verify in C.
"""
Each test builds cases -- requests exactly as botocore signed them, plus tampered copies with the result
proxy/s3/sigv4.c must give -- writes them to a JSON file, and runs the unit test binary test_sigv4 with
FT_SIGV4_CASES=<file>. In that mode the binary verifies every case (and, for accepted requests with a
body, checks x-amz-content-sha256 with ft_sha256_* or decodes the aws-chunked body with the chunked
decoder) and prints "sigv4 cases: N checked, M failed". The test asserts N is the number of cases
written and M is 0, so it cannot pass on an empty or skipped run.

Client-API requests are caught in botocore's before-send event and never leave the process: no server
and no network is involved. The binary is $FT_BUILD/tests/test_sigv4 (default: the build directory of
$FT_BIN, else build/); inside this tree it is brought up to date with make first.
"""
import datetime
import hashlib
import hmac
import json
import os
import random
import re
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit

import boto3
import botocore.config
import pytest
from botocore.auth import S3SigV4Auth, S3SigV4QueryAuth, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

ROOT = Path(__file__).resolve().parents[2]
ENDPOINT = "http://127.0.0.1:51999/s3"  # never contacted: requests are caught before sending
REGION = "us-east-1"
KEYS = {
    "AKIAFTTESTKEY0000001": "secret/with+plus=and/slashes0000000000000",
    "AKIAFTTESTKEY0000002": "an0ther-Secret_key~with.odd.chars",
}
AK1, AK2 = list(KEYS)
MAX_SKEW = 15 * 60

TRICKY_KEYS = [
    "plain.txt",
    "with space.txt",
    "  leading and trailing  ",
    "unicode-\u043a\u043b\u044e\u0447-\u65e5\u672c\u8a9e.bin",
    "emoji-\U0001f600.txt",
    "plus+sign+",
    "equals=sign==",
    "tilde~x~",
    "percent%41literal%2F%",
    "a//double//slash",
    "/leading-slash",
    "trailing/",
    "dots/./and/../x",
    "special !$&'()*,;:@",
    "q?mark#hash",
    "brackets[]{}<>|^`\"\\",
    "tab\there",
    "dir/sub dir/file name+1=2~3%4.txt",
]


def binary():
    """Path of test_sigv4, rebuilt with make when it belongs to this tree."""
    build = os.environ.get("FT_BUILD")
    if not build:
        ft_bin = os.environ.get("FT_BIN")
        build = str(Path(ft_bin).parent) if ft_bin else str(ROOT / "build")
    build = Path(build).resolve()
    target = build / "tests" / "test_sigv4"
    try:
        rel = build.relative_to(ROOT)
    except ValueError:
        rel = None
    if rel is not None:
        cmd = ["make", "-C", str(ROOT), "BUILD=%s" % rel, str(rel / "tests" / "test_sigv4")]
        # The Makefile's convention: build/<sanitizer> holds a sanitizer build.
        if len(rel.parts) == 2 and rel.parts[0] == "build" and rel.parts[1] in ("address", "undefined", "thread"):
            cmd.insert(3, "SANITIZER=%s" % rel.parts[1])
        env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
        res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, "building test_sigv4 failed:\n%s\n%s" % (res.stdout[-4000:], res.stderr[-4000:])
    assert target.is_file(), "%s is missing" % target
    return target


def run_cases(tmp_path, cases):
    """Writes the cases, runs the verifier on them and checks every one was checked and passed."""
    assert cases, "no cases generated"
    path = tmp_path / "sigv4-cases.json"
    path.write_text(json.dumps({"keys": KEYS, "cases": cases}, indent=1))
    env = dict(os.environ, FT_SIGV4_CASES=str(path))
    res = subprocess.run([str(binary())], env=env, capture_output=True, text=True, timeout=600)
    out = res.stdout + res.stderr
    m = re.search(r"^sigv4 cases: (\d+) checked, (\d+) failed$", out, re.M)
    assert m, "no summary line from test_sigv4:\n" + out[-6000:]
    checked, failed = int(m.group(1)), int(m.group(2))
    assert (checked, failed, res.returncode) == (len(cases), 0, 0), out[-12000:]
    assert "[  PASSED  ] 1 test(s)." in out, out[-6000:]
    assert "ERROR: AddressSanitizer" not in out and "runtime error:" not in out, out[-6000:]
    return checked


# ---- turning botocore's requests into cases ----

def wire_host(url):
    # what an HTTP client sends as Host (the ports used here are never the scheme's default)
    return urlsplit(url).netloc


def header_items(headers):
    items = []
    for name, value in headers.items():
        if isinstance(value, bytes):
            value = value.decode("latin-1")
        items.append([str(name), str(value)])
    return items


def make_case(name, method, url, headers, now, expect="OK", body=None, payload=None):
    parts = urlsplit(url)
    items = header_items(headers)
    if not any(n.lower() == "host" for n, _ in items):
        items.insert(0, ["Host", wire_host(url)])
    case = {"name": name, "method": method, "path": parts.path, "query": parts.query, "headers": items,
            "now": int(now), "expect": expect}
    if body is not None:
        case["body_hex"] = bytes(body).hex()
    if payload is not None:
        case["payload_hex"] = bytes(payload).hex()
    return case


def amz_date_of(case):
    for n, v in case["headers"]:
        if n.lower() == "x-amz-date":
            return v
    m = re.search(r"(?:^|&)X-Amz-Date=(\d{8}T\d{6}Z)", case["query"])
    if m:
        return m.group(1)
    for n, v in case["headers"]:
        if n.lower() == "date":
            return datetime.datetime.strptime(v[:25], "%a, %d %b %Y %H:%M:%S").strftime("%Y%m%dT%H%M%SZ")
    raise AssertionError("no date in case %s" % case["name"])


def epoch(amz_date):
    return int(datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.timezone.utc).timestamp())


def with_header(case, name, value):
    c = json.loads(json.dumps(case))
    for h in c["headers"]:
        if h[0].lower() == name.lower():
            h[1] = value
    return c


def variant(case, suffix, expect, **changes):
    c = json.loads(json.dumps(case))
    c["name"] = case["name"] + " / " + suffix
    c["expect"] = expect
    c.update(changes)
    return c


def header_negatives(case):
    """Tampered copies of an accepted header-signed request, with the verdict each must get."""
    auth = dict((n.lower(), v) for n, v in case["headers"])["authorization"]
    sig = auth[-64:]
    flipped = auth[:-1] + ("0" if auth[-1] != "0" else "1")
    unknown = re.sub(r"Credential=[^/]+/", "Credential=AKIAUNKNOWNKEY0000000/", auth)
    sigv2 = "AWS %s:%s" % (AK1, "frJIUN8DYpKDtOLCwo//yllqDzg=")
    when = epoch(amz_date_of(case))
    out = [
        variant(case, "path changed", "MISMATCH", path=case["path"] + "x"),
        variant(case, "query added", "MISMATCH", query=(case["query"] + "&" if case["query"] else "") + "x-id=1"),
        variant(case, "method changed", "MISMATCH", method="DELETE" if case["method"] != "DELETE" else "GET"),
        variant(case, "clock ahead", "SKEWED", now=when + MAX_SKEW + 5),
        variant(case, "clock behind", "SKEWED", now=when - MAX_SKEW - 5),
    ]
    out.append(variant(with_header(case, "authorization", flipped), "signature flipped", "MISMATCH"))
    out.append(variant(with_header(case, "authorization", unknown), "unknown key", "UNKNOWN_KEY"))
    out.append(variant(with_header(case, "authorization", sigv2), "sigv2", "UNSUPPORTED"))
    out.append(variant(with_header(case, "host", "127.0.0.2:51999"), "host changed", "MISMATCH"))
    assert len(sig) == 64
    return out


def presigned_negatives(case):
    when = epoch(amz_date_of(case))
    expires = int(re.search(r"X-Amz-Expires=(\d+)", case["query"]).group(1))
    q = case["query"]
    sig = re.search(r"X-Amz-Signature=([0-9a-f]{64})", q).group(1)
    other_expires = q.replace("X-Amz-Expires=%d&" % expires, "X-Amz-Expires=%d&" % (expires - 1 or 2))
    assert other_expires != q
    return [
        variant(case, "expired", "EXPIRED", now=when + expires + 1),
        variant(case, "dated in the future", "SKEWED", now=when - MAX_SKEW - 60),
        variant(case, "path changed", "MISMATCH", path=case["path"] + "x"),
        variant(case, "expires changed", "MISMATCH", now=when, query=other_expires),
        variant(case, "signature flipped", "MISMATCH",
                query=q.replace(sig, sig[:-1] + ("0" if sig[-1] != "0" else "1"))),
        variant(case, "param added", "MISMATCH", query=q + "&response-content-type=text%2Fhtml"),
        variant(case, "no signature", "MALFORMED", query=q.replace("X-Amz-Signature=" + sig, "")),
    ]


# ---- the boto3 client: capture instead of send ----

class Captured(Exception):
    pass


def client(access_key=AK1, token=None, **s3cfg):
    s3cfg.setdefault("addressing_style", "path")
    cfg = botocore.config.Config(signature_version="s3v4", s3=s3cfg, retries={"max_attempts": 0})
    c = boto3.session.Session().client(
        "s3", endpoint_url=ENDPOINT, region_name=REGION, aws_access_key_id=access_key,
        aws_secret_access_key=KEYS[access_key], aws_session_token=token, config=cfg)
    return c


def capture(c, op, **params):
    """Runs op on client c; returns the request botocore was about to send, as signed."""
    seen = []

    def hook(request, **kwargs):
        seen.append(request)
        raise Captured()

    c.meta.events.register("before-send.s3", hook)
    try:
        with pytest.raises(Captured):
            getattr(c, op)(**params)
    finally:
        c.meta.events.unregister("before-send.s3", hook)
    assert len(seen) == 1
    r = seen[0]
    body = r.body
    if hasattr(body, "read"):
        pos = body.tell()
        body = body.read()
        r.body.seek(pos)
    return r, (body or b"")


def client_case(name, c, op, **params):
    r, body = capture(c, op, **params)
    case = make_case(name, r.method, r.url, r.headers, time.time(), body=body if body else None)
    return case


def test_boto3_client_requests(tmp_path):
    c1, c2 = client(AK1), client(AK2)
    ct = client(AK1, token="FwoGZXIvYXdzEXAMPLE/session+token==")
    cases = []
    for i, key in enumerate(TRICKY_KEYS):
        c = (c1, c2)[i % 2]
        cases.append(client_case("get_object %r" % key, c, "get_object", Bucket="bkt", Key=key))
        cases.append(client_case("get_object range %r" % key, c, "get_object", Bucket="bkt", Key=key,
                                 Range="bytes=0-9", IfNoneMatch='"etag"'))
        cases.append(client_case("head_object %r" % key, c, "head_object", Bucket="bkt", Key=key))
        cases.append(client_case("put_object %r" % key, c, "put_object", Bucket="bkt", Key=key,
                                 Body=("body of %s\r\n" % key).encode() * (i + 1),
                                 Metadata={"note": "  spaced   out  value ", "k": key.encode().hex()}))
        cases.append(client_case("delete_object %r" % key, c, "delete_object", Bucket="bkt", Key=key))
        cases.append(client_case("list_objects_v2 prefix %r" % key, c, "list_objects_v2", Bucket="bkt",
                                 Prefix=key, Delimiter="/", StartAfter=key + "~", MaxKeys=7))
        cases.append(client_case("copy_object %r" % key, c, "copy_object", Bucket="bkt", Key=key + ".copy",
                                 CopySource={"Bucket": "src", "Key": key}))
        cases.append(client_case("upload_part %r" % key, c, "upload_part", Bucket="bkt", Key=key, PartNumber=3,
                                 UploadId="up+id/with=odd~chars %", Body=b"part-data"))
    cases.append(client_case("list_buckets", c1, "list_buckets"))
    cases.append(client_case("create_bucket", c1, "create_bucket", Bucket="new-bucket"))
    cases.append(client_case("head_bucket", c2, "head_bucket", Bucket="bkt"))
    cases.append(client_case("list continuation", c1, "list_objects_v2", Bucket="bkt",
                             ContinuationToken="1/a+b=c==", FetchOwner=True))
    cases.append(client_case("create_multipart_upload", c1, "create_multipart_upload", Bucket="bkt", Key="mp key"))
    cases.append(client_case("complete_multipart_upload", c1, "complete_multipart_upload", Bucket="bkt",
                             Key="mp key", UploadId="u1",
                             MultipartUpload={"Parts": [{"ETag": '"e1"', "PartNumber": 1}]}))
    cases.append(client_case("delete_objects", c2, "delete_objects", Bucket="bkt",
                             Delete={"Objects": [{"Key": k} for k in TRICKY_KEYS[:5]]}))
    cases.append(client_case("get_object_acl", c2, "get_object_acl", Bucket="bkt", Key="x y"))
    cases.append(client_case("session token get", ct, "get_object", Bucket="bkt", Key="tok en"))
    cases.append(client_case("session token put", ct, "put_object", Bucket="bkt", Key="tok", Body=b"x"))
    positives = [c for c in cases if c["expect"] == "OK"]
    for c in positives[::3]:
        cases += header_negatives(c)
    n = run_cases(tmp_path, cases)
    assert len(positives) >= 150 and n > len(positives)


def test_boto3_presigned_urls(tmp_path):
    c1, c2 = client(AK1), client(AK2)
    ct = client(AK2, token="IQoJb3JpZ2luX2VjEXAMPLE+tok/en=")
    cases = []
    for i, key in enumerate(TRICKY_KEYS):
        c = (c1, c2, ct)[i % 3]
        for op, params, expires in (
            ("get_object", {"Bucket": "bkt", "Key": key}, 3600),
            ("get_object", {"Bucket": "bkt", "Key": key, "ResponseContentDisposition":
                            'attachment; filename="%s"' % key, "ResponseContentType": "text/plain; a=b"}, 1),
            ("put_object", {"Bucket": "bkt", "Key": key}, 604800),
            ("head_object", {"Bucket": "bkt", "Key": key}, 60),
        ):
            url = c.generate_presigned_url(op, Params=params, ExpiresIn=expires)
            method = {"get_object": "GET", "put_object": "PUT", "head_object": "HEAD"}[op]
            case = make_case("presigned %s %r (%d s)" % (op, key, expires), method, url, {}, time.time())
            case["now"] = epoch(amz_date_of(case)) + expires // 2
            cases.append(case)
    url = c1.generate_presigned_url("list_objects_v2", Params={"Bucket": "bkt", "Prefix": "a b+c"}, ExpiresIn=900)
    cases.append(make_case("presigned list", "GET", url, {}, time.time()))
    for c in [c for c in cases if c["expect"] == "OK"][::2]:
        cases += presigned_negatives(c)
    run_cases(tmp_path, cases)


# ---- the signer classes on hand-made requests ----

def sign(auth_cls, creds, method, url, headers=(), body=b"", service="s3", context=None, **kw):
    req = AWSRequest(method=method, url=url, data=body)
    for n, v in headers:
        req.headers[n] = v  # HTTPHeaders appends: a repeated name keeps every value
    if context:
        req.context.update(context)
    auth_cls(creds, service, REGION, **kw).add_auth(req)
    return req


def signer_case(name, req, body=b"", now=None, expect="OK"):
    return make_case(name, req.method, req.url, req.headers, time.time() if now is None else now, expect=expect,
                     body=body if body else None)


def test_botocore_signers(tmp_path):
    creds = Credentials(AK1, KEYS[AK1])
    creds2 = Credentials(AK2, KEYS[AK2], "session/token+value==")
    base = "http://127.0.0.1:51999/s3/bkt"
    odd_headers = [("X-Amz-Meta-Multi", "first   value"), ("X-Amz-Meta-Multi", "  second\tvalue  "),
                   ("X-Amz-Meta-Empty", ""), ("Content-Type", "text/plain;  charset=utf-8"),
                   ("Cache-Control", "no-cache,  no-store")]
    cases = []
    queries = [
        "acl",                                   # no '='
        "acl&versionId=v1",
        "a=2&a=1&a=10&b",                        # repeated names, sorted by value
        "empty=&novalue&z=last",
        "prefix=a%20b%2Bc&delimiter=%2F",
        "k=~%2A%21%27%28%29%2B",                 # '~' kept, sub-delims and '+' encoded
        "k=v%3Dw%26x",                           # '=' and '&' inside a value
        "uploads",
        "list-type=2&start-after=%E6%97%A5%E6%9C%AC&max-keys=1000",
        "Param-3=Value3&Param=Value2&%E1%88%B4=Value1",
        "UPPER=1&lower=2&_under=3&-dash=4&.dot=5",
    ]
    paths = ["/obj", "/a%20b/c%2Bd%3De~f%25g", "/a//b///c", "/dots/./x/../y", "/%E2%82%AC/%F0%9F%98%80",
             "/trailing/", ""]
    for i, q in enumerate(queries):
        for j, p in enumerate(paths):
            url = base + p + ("?" + q if q else "")
            req = sign(S3SigV4Auth, (creds, creds2)[(i + j) % 2], "GET", url, odd_headers if j % 2 else ())
            cases.append(signer_case("S3SigV4Auth GET %s?%s" % (p, q), req))
    # botocore's params mode: it signs spaces as %20 but its wire URL (urlencode) carries them as '+',
    # as the Go SDK and curl do too. In a query '+' is a space.
    params = [("prefix", "a b+c~d"), ("list-type", "2"), ("empty", ""), ("k", "x y z")]
    req = AWSRequest(method="GET", url=base, params=params)
    S3SigV4Auth(creds, "s3", REGION).add_auth(req)
    wire = req.prepare().url
    assert "prefix=a+b%2Bc~d" in wire
    cases.append(make_case("S3SigV4Auth params mode, spaces as +", "GET", wire, req.headers, time.time()))
    for c in [c for c in cases if "%20" in c["query"]]:
        cases.append(variant(c, "spaces sent as +", "OK", query=c["query"].replace("%20", "+")))
        cases.append(variant(c, "literal plus instead of space", "MISMATCH", query=c["query"].replace("%20", "%2B")))
    # Signed bodies, an UNSIGNED-PAYLOAD request (https, payload signing off), a Date-only request.
    rnd = random.Random(7)
    for size in (0, 1, 100, 65536 + 3):
        body = bytes(rnd.getrandbits(8) for _ in range(size))
        req = sign(S3SigV4Auth, creds, "PUT", base + "/blob%20%2B" + str(size), odd_headers, body=body)
        cases.append(signer_case("S3SigV4Auth PUT %d bytes" % size, req, body=body))
    cfg = botocore.config.Config(s3={"payload_signing_enabled": False})
    req = sign(S3SigV4Auth, creds, "PUT", "https://127.0.0.1:51443/s3/bkt/unsigned", [("Content-MD5", "x")],
               body=b"unsigned body", context={"client_config": cfg})
    assert dict(req.headers)["X-Amz-Content-SHA256"] == "UNSIGNED-PAYLOAD"
    cases.append(signer_case("S3SigV4Auth UNSIGNED-PAYLOAD", req))
    # SigV4Auth (generic: it dot-normalizes and re-quotes the path), where that equals S3's rule.
    for q in queries:
        req = sign(SigV4Auth, creds, "GET", base + "/plain-object.txt?" + q,
                   [("Date", "Mon, 01 Jan 2001 00:00:00 GMT"),
                    ("X-Amz-Content-SHA256", hashlib.sha256(b"").hexdigest())] + odd_headers)
        assert "X-Amz-Date" not in req.headers  # botocore signs with Date only when Date is present
        cases.append(signer_case("SigV4Auth Date-only ?%s" % q, req))
    # S3SigV4QueryAuth: presigned by hand, expiry bounds.
    for expires in (1, 3600, 604800):
        for p in paths:
            req = sign(S3SigV4QueryAuth, creds2, "GET", base + p + "?versionId=v%2B1&acl", expires=expires)
            case = signer_case("S3SigV4QueryAuth %s (%d s)" % (p, expires), req)
            case["now"] = epoch(amz_date_of(case)) + expires
            cases.append(case)
    positives = [c for c in cases if c["expect"] == "OK"]
    for c in positives[::4]:
        if "X-Amz-Signature=" in c["query"]:
            cases += presigned_negatives(c)
        else:
            cases += header_negatives(c)
    # Unsigned extra headers do not matter; a changed signed one does.
    c = positives[1]
    cases.append(variant(dict(c, headers=c["headers"] + [["X-Forwarded-For", "10.0.0.1"]]), "unsigned extra", "OK"))
    cases.append(variant(with_header(c, "X-Amz-Meta-Multi", "changed"), "multi changed", "MISMATCH"))
    run_cases(tmp_path, cases)


# ---- aws-chunked uploads: a seed signed by botocore, chunks signed here ----

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def signing_key(secret, date8, region, service):
    k = hmac.new(("AWS4" + secret).encode(), date8.encode(), hashlib.sha256).digest()
    for part in (region, service, "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    return k


def chunk_body(key, amz_date, scope, seed, chunks):
    """The aws-chunked framing of chunks, each signed in chain from seed (AWS's streaming PUT scheme)."""
    out, prev = b"", seed
    for data in list(chunks) + [b""]:
        sts = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope, prev, EMPTY_SHA256,
                         hashlib.sha256(data).hexdigest()])
        prev = hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()
        out += b"%x;chunk-signature=%s\r\n" % (len(data), prev.encode()) + data + b"\r\n"
    return out


def test_chunk_signer_matches_aws_example():
    """This file's chunk signer reproduces AWS's documented example, so its bodies below are right."""
    key = signing_key("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "20130524", "us-east-1", "s3")
    body = chunk_body(key, "20130524T000000Z", "20130524/us-east-1/s3/aws4_request",
                      "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9",
                      [b"a" * 65536, b"a" * 1024])
    assert len(body) == 66824
    sigs = re.findall(rb"chunk-signature=([0-9a-f]{64})", body)
    assert [s.decode() for s in sigs] == [
        "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
        "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
        "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9",
    ]


def test_aws_chunked_uploads(tmp_path):
    rnd = random.Random(11)
    cases = []
    for n, sizes in enumerate([[1], [65536, 1024], [8192] * 5 + [17], [3, 0x10000, 5], [100000]]):
        chunks = [bytes(rnd.getrandbits(8) for _ in range(s)) for s in sizes]
        # framing look-alikes inside the data
        chunks[0] = (b"0;chunk-signature=" + b"f" * 64 + b"\r\n\r\n" + chunks[0])[:len(chunks[0])]
        payload = b"".join(chunks)
        headers = [("Content-Encoding", "aws-chunked"), ("X-Amz-Decoded-Content-Length", str(len(payload))),
                   ("X-Amz-Content-SHA256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD")]
        creds = Credentials((AK1, AK2)[n % 2], KEYS[(AK1, AK2)[n % 2]])
        # SigV4Auth keeps a given X-Amz-Content-SHA256 (S3SigV4Auth would replace it); the path is plain,
        # where both agree.
        req = sign(SigV4Auth, creds, "PUT", "http://127.0.0.1:51999/s3/bkt/chunked-%d.bin" % n, headers)
        auth = req.headers["Authorization"]
        seed = auth[-64:]
        amz_date = req.headers["X-Amz-Date"]
        scope = "%s/%s/s3/aws4_request" % (amz_date[:8], REGION)
        key = signing_key(creds.secret_key, amz_date[:8], REGION, "s3")
        body = chunk_body(key, amz_date, scope, seed, chunks)
        case = signer_case("aws-chunked %s" % sizes, req)
        case["body_hex"], case["payload_hex"] = body.hex(), payload.hex()
        cases.append(case)
        # A flipped data byte must fail the chunk check (the request itself still verifies).
        bad = bytearray(body)
        bad[body.index(b"\r\n") + 2 + len(chunks[0]) // 2] ^= 0x20
        broken = variant(case, "data byte flipped", "OK")
        broken["body_hex"] = bytes(bad).hex()
        broken["expect_body"] = "bad"
        cases.append(broken)
        # A chunk dropped: the chain of signatures breaks.
        if len(chunks) > 1:
            dropped = variant(case, "chunk dropped", "OK")
            dropped["body_hex"] = chunk_body(key, amz_date, scope, seed, chunks[1:]).hex()
            dropped["expect_body"] = "bad"
            cases.append(dropped)
        # Signed with another seed (a replayed body under a new request): the first chunk fails.
        replay = variant(case, "other seed", "OK")
        replay["body_hex"] = chunk_body(key, amz_date, scope, "0" * 64, chunks).hex()
        replay["expect_body"] = "bad"
        cases.append(replay)
    assert sum(1 for c in cases if "expect_body" not in c) == 5
    run_cases(tmp_path, cases)
