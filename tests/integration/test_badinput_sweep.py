# SPDX-License-Identifier: Apache-2.0
# Bad input on every endpoint: malformed bodies, queries and headers get a 4xx with the API's error body, nothing stored.
import json

import pytest

import s3util
from ftutil import TIMEOUT, Api, RawConn, assert_json_error, session, unique

BIG = 2 ** 63


@pytest.fixture(scope="module")
def api_m(cluster):
    return Api(cluster.url, session())


@pytest.fixture(scope="module")
def bkt(api_m):
    b = unique("sweep")
    api_m.create_bucket(b)
    api_m.put(b, "obj", b"0123456789")
    yield b
    api_m.destroy_bucket(b, expect=None)


def _body(b):
    """A case's body as sent: bytes as they are, a str encoded, anything else as JSON."""
    if b is None or isinstance(b, bytes):
        return b
    return b.encode() if isinstance(b, str) else json.dumps(b).encode()


def _state(a):
    """What a refused request must not change: the buckets, the ETL registry, the jobs."""
    bmd = a.bmd()
    bks = sorted((b["provider"], b["name"]) for b in bmd["buckets"])
    etl = a.s.get(a.url + "/v1/etl", timeout=TIMEOUT)
    jobs = a.s.get(a.url + "/v1/jobs", timeout=TIMEOUT)
    assert jobs.status_code == 200, jobs.text
    ids = sorted(j["id"] for j in jobs.json())
    return bks, etl.text, ids


# (id, method, path, body, status); in the path {b} is the module's bucket, {n} a fresh bucket name, {t} a target id
ACT = "/v1/buckets/{b}"
NEW = "/v1/buckets/{n}"
NATIVE = [
    # create-bck
    ("create-truncated", "POST", NEW, b'{"action":"create-bck"', 400),
    ("create-array", "POST", NEW, [], 400),
    ("create-string", "POST", NEW, "\"create-bck\"", 400),
    ("create-null", "POST", NEW, b"null", 400),
    ("create-action-number", "POST", NEW, {"action": 5}, 400),
    ("create-action-null", "POST", NEW, {"action": None}, 400),
    ("create-unknown-action", "POST", NEW, {"action": "create-bucket"}, 400),
    ("create-value-array", "POST", NEW, {"action": "create-bck", "value": []}, 400),
    ("create-cksum-bogus", "POST", NEW, {"action": "create-bck", "value": {"checksum": {"type": "sha0"}}}, 400),
    ("create-cksum-number", "POST", NEW, {"action": "create-bck", "value": {"checksum": {"type": 5}}}, 400),
    ("create-cksum-string", "POST", NEW, {"action": "create-bck", "value": {"checksum": "md5"}}, 400),
    ("create-nul-byte", "POST", NEW, b'{"action":"create-bck\x00"}', 400),
    ("create-nul-escape", "POST", NEW, b'{"action":"create-bck\\u0000"}', 400),
    ("create-bad-utf8", "POST", NEW, b'{"action":"create-bck","value":{"checksum":{"type":"\xff"}}}', 400),
    ("create-too-big", "POST", NEW, b'{"action":"create-bck","x":"' + b"a" * (2 << 20) + b'"}', 413),
    ("create-bad-provider", "POST", NEW + "?provider=zz", {"action": "create-bck"}, 400),
    # set-bprops
    ("bprops-value-array", "POST", ACT, {"action": "set-bprops", "value": []}, 400),
    ("bprops-value-empty", "POST", ACT, {"action": "set-bprops", "value": {}}, 400),
    ("bprops-unknown-field", "POST", ACT, {"action": "set-bprops", "value": {"nonsense": 1}}, 400),
    ("bprops-cksum-bogus", "POST", ACT, {"action": "set-bprops", "value": {"checksum": {"type": "x"}}}, 400),
    ("bprops-copies-negative", "POST", ACT, {"action": "set-bprops", "value": {"mirror": {"copies": -1}}}, 400),
    ("bprops-copies-string", "POST", ACT, {"action": "set-bprops", "value": {"mirror": {"copies": "2"}}}, 400),
    ("bprops-copies-float", "POST", ACT, {"action": "set-bprops", "value": {"mirror": {"copies": 1.5}}}, 400),
    ("bprops-copies-huge", "POST", ACT, {"action": "set-bprops", "value": {"mirror": {"copies": BIG}}}, 400),
    ("bprops-mirror-array", "POST", ACT, {"action": "set-bprops", "value": {"mirror": []}}, 400),
    ("bprops-ec-negative", "POST", ACT,
     {"action": "set-bprops", "value": {"ec": {"enabled": True, "data_slices": -1, "parity_slices": 1}}}, 400),
    ("bprops-acl-bogus", "POST", ACT, {"action": "set-bprops", "value": {"acl": "everyone"}}, 400),
    # copy-bck
    ("copy-no-value", "POST", ACT, {"action": "copy-bck"}, 400),
    ("copy-to-string", "POST", ACT, {"action": "copy-bck", "value": {"to": "x"}}, 400),
    ("copy-to-bad-name", "POST", ACT, {"action": "copy-bck", "value": {"to": {"name": "a b"}}}, 400),
    ("copy-to-bad-provider", "POST", ACT,
     {"action": "copy-bck", "value": {"to": {"name": "x", "provider": "zz"}}}, 400),
    ("copy-listrange-no-names", "POST", ACT, {"action": "copy-listrange", "value": {"to": {"name": "x"}}}, 400),
    # jobs over stored objects
    ("mirror-value-array", "POST", ACT, {"action": "make-n-copies", "value": []}, 400),
    ("mirror-prefix-number", "POST", ACT, {"action": "make-n-copies", "value": {"prefix": 5}}, 400),
    ("scrub-unknown-field", "POST", ACT, {"action": "scrub", "value": {"prefixx": "a"}}, 400),
    ("ec-encode-value-string", "POST", ACT, {"action": "ec-encode", "value": "a/"}, 400),
    ("destroy-bad-action", "DELETE", ACT, {"action": "nonsense"}, 400),
    ("destroy-truncated", "DELETE", ACT, b'{"action":', 400),
    ("destroy-bad-provider", "DELETE", ACT + "?provider=zz", None, 400),
    # list-range jobs
    ("delete-value-empty", "POST", ACT, {"action": "delete-listrange", "value": {}}, 400),
    ("delete-objnames-string", "POST", ACT, {"action": "delete-listrange", "value": {"objnames": "a"}}, 400),
    ("delete-objnames-number", "POST", ACT, {"action": "delete-listrange", "value": {"objnames": [5]}}, 400),
    ("delete-objname-nul", "POST", ACT, {"action": "delete-listrange", "value": {"objnames": ["a\u0000b"]}}, 400),
    ("delete-template-bad", "POST", ACT, {"action": "delete-listrange", "value": {"template": "a-{9..}"}}, 400),
    ("delete-two-forms", "POST", ACT,
     {"action": "delete-listrange", "value": {"objnames": ["a"], "template": "a-{0..1}"}}, 400),
    ("prefetch-on-ais", "POST", ACT, {"action": "prefetch-listrange", "value": {"objnames": ["a"]}}, 400),
    ("evict-on-ais", "POST", ACT, {"action": "evict-remote-bucket"}, 400),
    # archive, dsort, download
    ("archive-no-value", "POST", ACT, {"action": "archive"}, 400),
    ("archive-value-array", "POST", ACT, {"action": "archive", "value": []}, 400),
    ("dsort-no-value", "POST", ACT, {"action": "dsort"}, 400),
    ("dsort-value-string", "POST", ACT, {"action": "dsort", "value": "x"}, 400),
    ("download-value-empty", "POST", ACT, {"action": "download", "value": {}}, 400),
    ("download-urls-string", "POST", ACT, {"action": "download", "value": {"urls": "http://x/"}}, 400),
    # order hints
    ("hint-epoch-negative", "POST", ACT, {"action": "order-hint", "value": {"epoch": -1, "objnames": ["a"]}}, 400),
    ("hint-epoch-string", "POST", ACT, {"action": "order-hint", "value": {"epoch": "1", "objnames": ["a"]}}, 400),
    ("hint-epoch-float", "POST", ACT, {"action": "order-hint", "value": {"epoch": 1.5, "objnames": ["a"]}}, 400),
    ("hint-epoch-huge", "POST", ACT, {"action": "order-hint", "value": {"epoch": BIG, "objnames": ["a"]}}, 400),
    ("hint-epoch-missing", "POST", ACT, {"action": "order-hint", "value": {"objnames": ["a"]}}, 400),
    ("hint-ttl-zero", "POST", ACT, {"action": "order-hint", "value": {"epoch": 1, "objnames": ["a"], "ttl_s": 0}}, 400),
    ("hint-ttl-over", "POST", ACT,
     {"action": "order-hint", "value": {"epoch": 1, "objnames": ["a"], "ttl_s": 604801}}, 400),
    ("hint-job-bad", "POST", ACT,
     {"action": "order-hint", "value": {"epoch": 1, "objnames": ["a"], "job": "a/b"}}, 400),
    ("hint-objnames-empty", "POST", ACT, {"action": "order-hint", "value": {"epoch": 1, "objnames": []}}, 400),
    ("hint-unknown-field", "POST", ACT,
     {"action": "order-hint", "value": {"epoch": 1, "objnames": ["a"], "x": 1}}, 400),
    ("hint-template-bad", "POST", ACT, {"action": "order-hint", "value": {"epoch": 1, "template": "s-{5..1}"}}, 400),
    ("hint-two-forms", "POST", ACT,
     {"action": "order-hint", "value": {"epoch": 1, "objnames": ["a"], "template": "s-{0..1}"}}, 400),
    ("hint-list-object-missing", "POST", ACT,
     {"action": "order-hint", "value": {"epoch": 1, "url_list_object": "no-such-list"}}, 404),
    ("hint-value-null", "POST", ACT, {"action": "order-hint", "value": None}, 400),
    # listing
    ("list-pagesize-word", "GET", ACT + "?pagesize=abc", None, 400),
    ("list-pagesize-negative", "GET", ACT + "?pagesize=-1", None, 400),
    ("list-pagesize-float", "GET", ACT + "?pagesize=1.5", None, 400),
    ("list-archive-bogus", "GET", ACT + "?archive=maybe", None, 400),
    ("list-provider-bogus", "GET", ACT + "?provider=zz", None, 400),
    ("list-prefix-nul", "GET", ACT + "?prefix=a%00b", None, 400),
    ("list-token-nul", "GET", ACT + "?continuation_token=a%00b", None, 400),
    ("list-remote-presence", "GET", "/v1/buckets?provider=aws&presence=9", None, 400),
    # cluster, daemon
    ("cluster-what-missing", "GET", "/v1/cluster", None, 400),
    ("cluster-what-bogus", "GET", "/v1/cluster?what=everything", None, 400),
    ("daemon-what-bogus", "GET", "/v1/daemon?what=everything", None, 400),
    ("cluster-put-truncated", "PUT", "/v1/cluster", b'{"action":', 400),
    ("cluster-put-action-bogus", "PUT", "/v1/cluster", {"action": "reboot"}, 400),
    ("cluster-put-action-number", "PUT", "/v1/cluster", {"action": 5}, 400),
    ("cluster-put-action-unbuilt", "PUT", "/v1/cluster", {"action": "rotate-logs"}, 501),  # AIStore's, not built
    ("cluster-put-start-kind-bogus", "PUT", "/v1/cluster", {"action": "start", "value": {"kind": "nonsense"}}, 400),
    ("cluster-put-start-no-kind", "PUT", "/v1/cluster", {"action": "start", "value": {}}, 400),
    ("cluster-put-start-kind-unbuilt", "PUT", "/v1/cluster", {"action": "start", "value": {"kind": "lru"}}, 501),
    ("cluster-put-start-kind-elsewhere", "PUT", "/v1/cluster",
     {"action": "start", "value": {"kind": "copy-bck"}}, 501),  # starts with its own request
    ("maint-no-sid", "PUT", "/v1/cluster", {"action": "start-maintenance", "value": {}}, 400),
    ("maint-sid-number", "PUT", "/v1/cluster", {"action": "start-maintenance", "value": {"sid": 5}}, 400),
    ("maint-value-string", "PUT", "/v1/cluster", {"action": "start-maintenance", "value": "t1"}, 400),
    ("mountpaths-no-sid", "GET", "/v1/cluster/mountpaths", None, 400),
    ("mountpaths-sid-unknown", "GET", "/v1/cluster/mountpaths?sid=t-nope", None, 404),
    ("mountpaths-truncated", "POST", "/v1/cluster/mountpaths?sid={t}", b'{"action":', 400),
    ("mountpaths-action-bogus", "POST", "/v1/cluster/mountpaths?sid={t}", {"action": "format", "path": "/tmp"}, 400),
    ("mountpaths-path-number", "POST", "/v1/cluster/mountpaths?sid={t}", {"action": "attach", "path": 5}, 400),
    ("stop-kind-bogus", "PUT", "/v1/cluster", {"action": "stop", "value": {"kind": "nonsense"}}, 400),
    ("daemon-put", "PUT", "/v1/daemon", {"action": "x"}, 405),
    # jobs
    ("jobs-stop-kind-bogus", "DELETE", "/v1/jobs?kind=nonsense", None, 400),
    ("jobs-stop-no-kind", "DELETE", "/v1/jobs", None, 400),
    ("jobs-stop-all-yes", "DELETE", "/v1/jobs?all=yes", None, 400),
    ("jobs-stop-kind-and-all", "DELETE", "/v1/jobs?kind=copy&all=true", None, 400),
    ("jobs-stop-bad-bucket", "DELETE", "/v1/jobs?kind=copy&bucket=a%20b", None, 400),
    ("jobs-stop-bad-provider", "DELETE", "/v1/jobs?kind=copy&provider=zz", None, 400),
    ("jobs-get-unknown", "GET", "/v1/jobs/j-nope", None, 404),
    ("jobs-get-nul", "GET", "/v1/jobs/j%00x", None, 400),
    ("jobs-delete-unknown", "DELETE", "/v1/jobs/j-nope", None, 404),
    ("jobs-delete-nul", "DELETE", "/v1/jobs/j%00x", None, 400),
    # ETL registry
    ("etl-truncated", "POST", "/v1/etl", b'{"name":', 400),
    ("etl-array", "POST", "/v1/etl", [], 400),
    ("etl-no-name", "POST", "/v1/etl", {"command": ["cat"]}, 400),
    ("etl-name-number", "POST", "/v1/etl", {"name": 5, "command": ["cat"]}, 400),
    ("etl-name-bad", "POST", "/v1/etl", {"name": "a/b", "command": ["cat"]}, 400),
    ("etl-name-long", "POST", "/v1/etl", {"name": "e" * 300, "command": ["cat"]}, 400),
    ("etl-command-string", "POST", "/v1/etl", {"name": "e1", "command": "cat"}, 400),
    ("etl-command-empty", "POST", "/v1/etl", {"name": "e1", "command": []}, 400),
    ("etl-command-number", "POST", "/v1/etl", {"name": "e1", "command": [5]}, 400),
    ("etl-both", "POST", "/v1/etl", {"name": "e1", "command": ["cat"], "url": "http://127.0.0.1:1/"}, 400),
    ("etl-neither", "POST", "/v1/etl", {"name": "e1"}, 400),
    ("etl-url-bad", "POST", "/v1/etl", {"name": "e1", "url": "not a url"}, 400),
    ("etl-timeout-negative", "POST", "/v1/etl", {"name": "e1", "command": ["cat"], "timeout_ms": -1}, 400),
    ("etl-timeout-string", "POST", "/v1/etl", {"name": "e1", "command": ["cat"], "timeout_ms": "5"}, 400),
    ("etl-unknown-field", "POST", "/v1/etl", {"name": "e1", "command": ["cat"], "nonsense": 1}, 400),
    ("etl-get-unknown", "GET", "/v1/etl/nope", None, 404),
    ("etl-get-nul", "GET", "/v1/etl/e%00x", None, 400),
    ("etl-delete-nul", "DELETE", "/v1/etl/e%00x", None, 400),
    # GetBatch
    ("batch-truncated", "POST", "/v1/batch", b'{"in":[', 400),
    ("batch-array", "POST", "/v1/batch", [], 400),
    ("batch-in-missing", "POST", "/v1/batch", {}, 400),
    ("batch-in-string", "POST", "/v1/batch", {"in": "x"}, 400),
    ("batch-in-empty", "POST", "/v1/batch", {"in": []}, 400),
    ("batch-item-not-object", "POST", "/v1/batch", {"in": [5]}, 400),
    ("batch-bucket-number", "POST", "/v1/batch", {"in": [{"bucket": 5, "objname": "obj"}]}, 400),
    ("batch-objname-missing", "POST", "/v1/batch", {"in": [{"bucket": "{b}"}]}, 400),
    ("batch-objname-nul", "POST", "/v1/batch", {"in": [{"bucket": "{b}", "objname": "a\u0000"}]}, 400),
    ("batch-format-bogus", "POST", "/v1/batch", {"in": [{"bucket": "{b}", "objname": "obj"}], "format": ".rar"}, 400),
    ("batch-start-negative", "POST", "/v1/batch", {"in": [{"bucket": "{b}", "objname": "obj", "start": -1}]}, 400),
    ("batch-length-string", "POST", "/v1/batch", {"in": [{"bucket": "{b}", "objname": "obj", "length": "5"}]}, 400),
    ("batch-start-huge", "POST", "/v1/batch", {"in": [{"bucket": "{b}", "objname": "obj", "start": BIG}]}, 400),
    ("batch-provider-bogus", "POST", "/v1/batch", {"in": [{"bucket": "{b}", "objname": "obj", "provider": "zz"}]},
     400),
    ("batch-flag-string", "POST", "/v1/batch",
     {"in": [{"bucket": "{b}", "objname": "obj"}], "continue_on_error": "yes"}, 400),
    ("moss-truncated", "GET", "/v1/ml/moss/{b}", b'{"in":[', 400),
    ("moss-array", "GET", "/v1/ml/moss/{b}", [], 400),
    ("moss-in-string", "GET", "/v1/ml/moss/{b}", {"in": "x"}, 400),
    ("moss-objname-number", "GET", "/v1/ml/moss/{b}", {"in": [{"objname": 5}]}, 400),
    ("moss-flag-string", "GET", "/v1/ml/moss/{b}", {"in": [{"objname": "obj"}], "coer": "yes"}, 400),
    ("moss-strm-number", "GET", "/v1/ml/moss/{b}", {"in": [{"objname": "obj"}], "strm": 1}, 400),
    ("moss-mime-bogus", "GET", "/v1/ml/moss/{b}", {"in": [{"objname": "obj"}], "mime": ".rar"}, 400),
    ("moss-mime-unbuilt", "GET", "/v1/ml/moss/{b}", {"in": [{"objname": "obj"}], "mime": ".zip"}, 501),
    ("moss-bad-provider", "GET", "/v1/ml/moss/{b}?provider=zz", {"in": [{"objname": "obj"}]}, 400),
]


def _native_call(a, bkt, method, path, body):
    name = unique("sweepnew")
    path = path.replace("{b}", bkt).replace("{n}", name).replace("{t}", a.smap()["targets"][0]["id"])
    if isinstance(body, (dict, list)):
        body = json.loads(json.dumps(body).replace("{b}", bkt))
    hdrs = {"Content-Type": "application/json"} if body is not None else None
    r = a.s.request(method, a.url + path, data=_body(body), allow_redirects=False, timeout=TIMEOUT, headers=hdrs)
    if r.status_code == 307:  # GetBatch: the owner of most items checks the items (the body goes again)
        r = a.s.request(method, r.headers["Location"], data=_body(body), allow_redirects=False,
                        timeout=TIMEOUT, headers=hdrs)
    return r, name


@pytest.mark.parametrize("method,path,body,status", [c[1:] for c in NATIVE], ids=[c[0] for c in NATIVE])
def test_native_bad_input(api_m, bkt, method, path, body, status):
    before = _state(api_m)
    r, name = _native_call(api_m, bkt, method, path, body)
    assert_json_error(r, status)
    after = _state(api_m)
    assert after == before, "a refused request changed the cluster"
    assert api_m.s.head(api_m.url + "/v1/buckets/" + name, timeout=TIMEOUT).status_code == 404


# Object GETs (through the proxy's redirect to the owner): bad query values and headers.
OBJ = [
    ("range-word", {"Range": "bytes=abc"}, "", 400),
    ("range-reversed", {"Range": "bytes=5-2"}, "", 400),
    ("range-past-end", {"Range": "bytes=100-200"}, "", 416),
    ("range-negative-start", {"Range": "bytes=-5-9"}, "", 400),
    ("archpath-not-archive", {}, "archpath=a.txt", 400),
    ("archpath-nul", {}, "archpath=a%00b", 400),
    ("archmode-bogus", {}, "archpath=a&archmode=fuzzy", 400),
    ("archregx-bad-regex", {}, "archregx=%28&archmode=regexp", 400),
    ("etl-unknown", {}, "etl=nope", 404),
    ("etl-bad-name", {}, "etl=a%2Fb", 404),
    ("provider-bogus", {}, "provider=zz", 400),
    ("range-several", {"Range": "bytes=0-1,3-4"}, "", 400),
    ("archmime-bogus", {}, "archpath=a&archmime=rar", 400),
    ("query-nul", {}, "x=%00", 400),
]


@pytest.mark.parametrize("headers,query,status", [c[1:] for c in OBJ], ids=[c[0] for c in OBJ])
def test_object_bad_query_and_headers(api_m, bkt, headers, query, status):
    r = api_m.s.get(api_m.url + "/v1/objects/%s/obj?%s" % (bkt, query), headers=headers, timeout=TIMEOUT)
    assert_json_error(r, status)


# ---- S3 ----
def _bad_list(case, query):
    """A listing of the module's bucket refused with 400 InvalidArgument."""
    return (case, "GET", "/{b}", query, {}, b"", 400, "InvalidArgument")


def _complete(case, xml, code, status=400):
    """CompleteMultipartUpload of the open upload with the body xml, refused."""
    return (case, "POST", "/{b}/{u}", "uploadId={id}", {}, xml, status, code)


def _parts(*numbers):
    return b"<CompleteMultipartUpload>" + b"".join(
        b"<Part><PartNumber>%s</PartNumber><ETag>x</ETag></Part>" % n for n in numbers) + \
        b"</CompleteMultipartUpload>"


CK_CRC32 = s3util.checksum_b64("crc32", b"data")  # the right CRC32 of the cases' body

S3 = [
    # (id, method, path, query, headers, body, status, S3 code); {b} the bucket, {n} a fresh bucket name,
    # {k} a fresh key, {u} the key and {id} the id of an open multipart upload
    ("delete-objects-malformed", "POST", "/{b}", "delete", {}, b"<Delete><Object><Key>a</Key>", 400, "MalformedXML"),
    ("delete-objects-not-xml", "POST", "/{b}", "delete", {}, b"{\"a\":1}", 400, "MalformedXML"),
    ("delete-objects-empty", "POST", "/{b}", "delete", {}, b"<Delete></Delete>", 400, "MalformedXML"),
    ("delete-objects-too-many", "POST", "/{b}", "delete", {},
     b"<Delete>" + b"<Object><Key>k</Key></Object>" * 1001 + b"</Delete>", 400, "MalformedXML"),
    ("delete-objects-bad-md5", "POST", "/{b}", "delete", {"Content-MD5": "!!notbase64"},
     b"<Delete><Object><Key>a</Key></Object></Delete>", 400, "InvalidDigest"),
    ("delete-objects-md5-mismatch", "POST", "/{b}", "delete", {"Content-MD5": "AAAAAAAAAAAAAAAAAAAAAA=="},
     b"<Delete><Object><Key>a</Key></Object></Delete>", 400, "BadDigest"),
    ("put-bad-md5", "PUT", "/{b}/{k}", "", {"Content-MD5": "!!notbase64"}, b"data", 400, "InvalidDigest"),
    ("put-short-md5", "PUT", "/{b}/{k}", "", {"Content-MD5": "AAAA"}, b"data", 400, "InvalidDigest"),
    ("put-bad-crc32", "PUT", "/{b}/{k}", "", {"x-amz-checksum-crc32": "!!!"}, b"data", 400, "InvalidRequest"),
    ("part-number-zero", "PUT", "/{b}/{k}", "partNumber=0&uploadId=x", {}, b"data", 400, "InvalidArgument"),
    ("part-number-over", "PUT", "/{b}/{k}", "partNumber=10001&uploadId=x", {}, b"data", 400,
     "InvalidArgument"),
    ("part-number-word", "PUT", "/{b}/{k}", "partNumber=abc&uploadId=x", {}, b"data", 400, "InvalidArgument"),
    ("part-number-negative", "PUT", "/{b}/{k}", "partNumber=-1&uploadId=x", {}, b"data", 400,
     "InvalidArgument"),
    ("upload-id-unknown", "PUT", "/{b}/{k}", "partNumber=1&uploadId=nope", {}, b"data", 404, "NoSuchUpload"),
    ("complete-unknown-upload", "POST", "/{b}/{k}", "uploadId=nope", {}, _parts(b"1"), 404, "NoSuchUpload"),
    _bad_list("list-max-keys-word", "list-type=2&max-keys=abc"),
    _bad_list("list-max-keys-negative", "list-type=2&max-keys=-1"),
    _bad_list("list-type-bogus", "list-type=3"),
    _bad_list("list-token-garbage", "list-type=2&continuation-token=%21%21%21"),
    _bad_list("list-prefix-nul", "list-type=2&prefix=o%00x"),
    _bad_list("list-start-after-nul", "list-type=2&start-after=%00"),
    _bad_list("list-v1-marker-nul", "marker=a%00"),
    _bad_list("list-encoding-bogus", "list-type=2&encoding-type=base64"),
    _bad_list("list-uploads-max-bogus", "uploads&max-uploads=abc"),
    _complete("complete-malformed", b"<CompleteMultipartUpload><Part>", "MalformedXML"),
    _complete("complete-empty", b"<CompleteMultipartUpload/>", "MalformedXML"),
    _complete("complete-wrong-root", b"<Delete/>", "MalformedXML"),
    _complete("complete-part-zero", _parts(b"0"), "MalformedXML"),
    _complete("complete-part-word", _parts(b"abc"), "MalformedXML"),
    _complete("complete-part-order", _parts(b"2", b"1"), "InvalidPart"),
    _complete("complete-too-many", _parts(*[b"%d" % i for i in range(1, 10002)]), "MalformedXML"),
    _complete("complete-missing-part", _parts(b"1"), "InvalidPart"),
    ("part-bad-md5", "PUT", "/{b}/{u}", "partNumber=1&uploadId={id}", {"Content-MD5": "%%%"}, b"data", 400,
     "InvalidDigest"),
    ("part-copy-range-reversed", "PUT", "/{b}/{u}", "partNumber=1&uploadId={id}",
     {"x-amz-copy-source": "/{b}/obj", "x-amz-copy-source-range": "bytes=5-2"}, b"", 400, "InvalidArgument"),
    ("part-copy-range-word", "PUT", "/{b}/{u}", "partNumber=1&uploadId={id}",
     {"x-amz-copy-source": "/{b}/obj", "x-amz-copy-source-range": "bytes=a-b"}, b"", 400, "InvalidArgument"),
    ("part-copy-range-past-end", "PUT", "/{b}/{u}", "partNumber=1&uploadId={id}",
     {"x-amz-copy-source": "/{b}/obj", "x-amz-copy-source-range": "bytes=0-100"}, b"", 400, "InvalidArgument"),
    ("put-decoded-length-word", "PUT", "/{b}/{k}", "",
     {"Content-Encoding": "aws-chunked", "x-amz-decoded-content-length": "abc"}, b"0\r\n\r\n", 400,
     "InvalidArgument"),
    ("copy-directive-bogus", "PUT", "/{b}/{k}", "",
     {"x-amz-copy-source": "/{b}/obj", "x-amz-metadata-directive": "MERGE"}, b"", 400, "InvalidArgument"),
    ("delete-objects-quiet-word", "POST", "/{b}", "delete", {},
     b"<Delete><Quiet>maybe</Quiet><Object><Key>a</Key></Object></Delete>", 400, "MalformedXML"),
    ("delete-objects-char-ref-nul", "POST", "/{b}", "delete", {},
     b"<Delete><Object><Key>a&#0;b</Key></Object></Delete>", 400, "MalformedXML"),
    ("delete-objects-no-key", "POST", "/{b}", "delete", {}, b"<Delete><Object></Object></Delete>", 400,
     "MalformedXML"),
    ("put-crc32-wrong-length", "PUT", "/{b}/{k}", "", {"x-amz-checksum-crc32": "AAAA"}, b"data", 400,
     "InvalidRequest"),
    ("put-two-checksums", "PUT", "/{b}/{k}", "",
     {"x-amz-checksum-crc32": "rfPzYw==", "x-amz-checksum-sha256": "n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg="},
     b"data", 400, "InvalidRequest"),
    # flexible checksums (x-amz-sdk-checksum-algorithm names the one x-amz-checksum-* sent or trailed)
    ("put-sdk-alg-unknown", "PUT", "/{b}/{k}", "",
     {"x-amz-sdk-checksum-algorithm": "MD5", "x-amz-checksum-crc32": CK_CRC32}, b"data", 400, "InvalidRequest"),
    ("put-sdk-alg-empty", "PUT", "/{b}/{k}", "",
     {"x-amz-sdk-checksum-algorithm": "", "x-amz-checksum-crc32": CK_CRC32}, b"data", 400, "InvalidRequest"),
    ("put-sdk-alg-no-checksum", "PUT", "/{b}/{k}", "", {"x-amz-sdk-checksum-algorithm": "CRC32"}, b"data", 400,
     "InvalidRequest"),
    ("put-sdk-alg-other", "PUT", "/{b}/{k}", "",
     {"x-amz-sdk-checksum-algorithm": "SHA256", "x-amz-checksum-crc32": CK_CRC32}, b"data", 400, "BadDigest"),
    ("part-sdk-alg-unknown", "PUT", "/{b}/{u}", "partNumber=1&uploadId={id}",
     {"x-amz-sdk-checksum-algorithm": "CRC16", "x-amz-checksum-crc32": CK_CRC32}, b"data", 400, "InvalidRequest"),
    ("part-crc32-mismatch", "PUT", "/{b}/{u}", "partNumber=1&uploadId={id}",
     {"x-amz-sdk-checksum-algorithm": "CRC32", "x-amz-checksum-crc32": s3util.checksum_b64("crc32", b"other")},
     b"data", 400, "BadDigest"),
    ("part-sha256-not-base64", "PUT", "/{b}/{u}", "partNumber=1&uploadId={id}",
     {"x-amz-checksum-sha256": "%" * 44}, b"data", 400, "InvalidRequest"),
] + [
    ("put-%s-%s" % (alg, case), "PUT", "/{b}/{k}", "",
     {"x-amz-sdk-checksum-algorithm": alg.upper(), "x-amz-checksum-" + alg: value}, b"data", 400, code)
    for alg in ("crc32", "crc32c", "crc64nvme", "sha1", "sha256")
    for case, value, code in (
        ("mismatch", s3util.checksum_b64(alg, b"other"), "BadDigest"),
        ("too-long", s3util.checksum_b64(alg, b"data") + "AAAA", "InvalidRequest"),
        ("not-base64", "!" * len(s3util.checksum_b64(alg, b"data")), "InvalidRequest"))
] + [
    ("put-if-none-match-etag", "PUT", "/{b}/{k}", "", {"If-None-Match": "\"abc\""}, b"data", 400,
     "InvalidArgument"),
    ("acl-body-wrong-root", "PUT", "/{b}", "acl", {}, b"<Delete/>", 400, "MalformedXML"),
    ("create-bad-name", "PUT", "/Bad_Name", "", {}, b"", 400, "InvalidBucketName"),
    ("get-range-past-end", "GET", "/{b}/obj", "", {"Range": "bytes=100-200"}, b"", 416, "InvalidRange"),
    ("copy-source-no-key", "PUT", "/{b}/{k}", "", {"x-amz-copy-source": "/{b}"}, b"", 400, "InvalidArgument"),
    ("copy-source-bad-percent", "PUT", "/{b}/{k}", "", {"x-amz-copy-source": "/{b}/%zz"}, b"", 400,
     "InvalidArgument"),
    ("copy-source-missing", "PUT", "/{b}/{k}", "", {"x-amz-copy-source": "/{b}/nope"}, b"", 404,
     "NoSuchKey"),
    ("acl-malformed", "PUT", "/{b}", "acl", {}, b"<AccessControlPolicy><Owner>", 400, "MalformedXML"),
    ("acl-canned-bogus", "PUT", "/{b}", "acl", {"x-amz-acl": "everyone-rw"}, b"", 400, "InvalidArgument"),
    ("create-config-malformed", "PUT", "/{n}", "", {}, b"<CreateBucketConfiguration><LocationConstraint>",
     400, "MalformedXML"),
    ("create-config-wrong-root", "PUT", "/{n}", "", {}, b"<Nonsense/>", 400, "MalformedXML"),
]


@pytest.fixture(scope="module")
def upload(cluster, bkt):
    """(key, upload id) of a multipart upload with no parts yet."""
    import xml.etree.ElementTree as ET
    key = unique("sweep-mpu")
    r = s3util.signed_request(cluster, "POST", "/%s/%s?uploads" % (bkt, key))
    assert r.status_code == 200, r.text
    return key, ET.fromstring(r.content).findtext("{*}UploadId")


@pytest.mark.parametrize("method,path,query,headers,body,status,code", [c[1:] for c in S3],
                         ids=[c[0] for c in S3])
def test_s3_bad_input(cluster, api_m, bkt, upload, method, path, query, headers, body, status, code):
    before = _state(api_m)
    name, key = unique("sweeps3").lower(), unique("sweep-key")
    path = path.replace("{b}", bkt).replace("{n}", name).replace("{k}", key).replace("{u}", upload[0])
    part = "partNumber=" in query and "uploadId={id}" in query  # a part of the open upload
    query = query.replace("{id}", upload[1])
    headers = {k: v.replace("{b}", bkt) for k, v in headers.items()}
    streaming = s3util.STREAMING if "x-amz-decoded-content-length" in headers else None
    r = s3util.signed_request(cluster, method, path + ("?" + query if query else ""), body, headers,
                              payload_hash=streaming)
    assert r.status_code == status, (r.status_code, r.content[:300])
    got, msg = s3util.xml_error(r)
    assert got == code, (got, msg)
    assert _state(api_m) == before
    assert api_m.s.head(api_m.url + "/v1/buckets/" + name, timeout=TIMEOUT).status_code == 404
    assert_json_error(api_m.get(bkt, key), 404)
    assert_json_error(api_m.get(bkt, upload[0]), 404)
    if part:  # no part stored either
        parts = s3util.signed_request(cluster, "GET", "/%s/%s?uploadId=%s" % (bkt, upload[0], upload[1]))
        assert parts.status_code == 200 and b"<Part>" not in parts.content, parts.content[:300]


# Heads the HTTP server refuses before any routing: (id, request bytes with {p} for the path, status, S3 code)
HEADS = [
    ("bad-request-line", b"GET {p} HTTP/1.1 extra\r\nHost: x\r\n\r\n", 400, "InvalidRequest"),
    ("bad-header-line", b"GET {p} HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n", 400, "InvalidRequest"),
    ("header-too-long", b"GET {p} HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n", 431,
     "RequestHeaderSectionTooLarge"),
    ("two-lengths", b"PUT {p} HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
     400, "InvalidRequest"),
    ("length-word", b"PUT {p} HTTP/1.1\r\nHost: x\r\nContent-Length: five\r\n\r\n", 400, "InvalidRequest"),
    ("chunked-not-last", b"PUT {p} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", 400,
     "InvalidRequest"),
    ("coding-unknown", b"PUT {p} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501,
     "NotImplemented"),
    ("no-host", b"GET {p} HTTP/1.1\r\n\r\n", 400, "InvalidRequest"),
    ("version-2", b"GET {p} HTTP/2.0\r\nHost: x\r\n\r\n", 505, "InvalidRequest"),
]


def _refused_head(url, req):
    with RawConn(url) as c:
        c.send(req)
        r = c.read_response()
        assert c.closed_by_peer(5)
    return r


@pytest.mark.parametrize("req,status,code", [c[1:] for c in HEADS], ids=[c[0] for c in HEADS])
def test_s3_refused_head_is_xml(cluster, bkt, req, status, code):
    """The server's own answers to a bad head are S3 XML on /s3 paths and JSON on the native API."""
    r = _refused_head(cluster.url, req.replace(b"{p}", b"/s3/%s/k?x=1" % bkt.encode()))
    assert r.status_code == status, (r.status_code, r.body[:300])
    assert r.headers.get("Content-Type", "").startswith("application/xml"), r.headers
    got, msg = s3util.xml_error(r)
    assert got == code and msg, (got, msg)
    assert_json_error(_refused_head(cluster.url, req.replace(b"{p}", b"/v1/objects/%s/k" % bkt.encode())), status)


@pytest.mark.parametrize("req", [b"GARBAGE\r\n\r\n", b"GET /s3/b\r\n\r\n", b"G(T /s3/b HTTP/1.1\r\n\r\n"])
def test_s3_unreadable_request_line_is_json(cluster, req):
    """With no path to read there is no telling the API: the native JSON error."""
    assert_json_error(_refused_head(cluster.url, req), 400)


def test_every_node_still_answers(cluster):
    for url in [cluster.url] + [t["public_url"] for t in cluster.targets()]:
        r = session().get(url + "/v1/health", timeout=TIMEOUT)
        assert r.status_code == 200, (url, r.status_code)
