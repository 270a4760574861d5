# SPDX-License-Identifier: Apache-2.0
# Helpers for the integration tests: native API calls, error-body checks, checksums, a raw HTTP/1.1 client.
import ctypes
import ctypes.util
import hashlib
import json
import os
import socket
import time
import urllib.parse
import uuid

import requests

TIMEOUT = 30  # seconds for any single HTTP exchange


def find_token(state_dir=None):
    """The access token to send: FT_TOKEN from the environment, else the file `token` at the top of
    state_dir (or of FT_STATE_DIR), else None (a cluster with authentication off)."""
    tok = os.environ.get("FT_TOKEN", "").strip()
    if tok:
        return tok
    d = state_dir or os.environ.get("FT_STATE_DIR")
    if d:
        try:
            with open(os.path.join(d, "token")) as f:
                return f.read().strip() or None
        except OSError:
            pass
    return None


def session(token=None):
    """A requests session that never goes through an environment proxy and sends the access token
    (token; None: find_token(); "": none) when there is one."""
    s = requests.Session()
    s.trust_env = False
    tok = find_token() if token is None else token
    if tok:
        s.headers["Authorization"] = "Bearer " + tok
    return s


def unique(prefix):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:10])


def _dots(segment):
    # "." and ".." segments are encoded as %2E so that no client library folds them away.
    return segment.replace(".", "%2E") if segment in (".", "..") else segment


def quote_name(name):
    """Object name -> URL path piece: percent-encoded, '/' kept."""
    if isinstance(name, str):
        name = name.encode()
    return "/".join(_dots(x) for x in urllib.parse.quote(name, safe="/").split("/"))


def quote_bucket(bucket):
    if isinstance(bucket, str):
        bucket = bucket.encode()
    return _dots(urllib.parse.quote(bucket, safe=""))


def obj_path(bucket, name):
    return "/v1/objects/%s/%s" % (quote_bucket(bucket), quote_name(name))


def bucket_path(bucket):
    return "/v1/buckets/" + quote_bucket(bucket)


# ---- errors ----
def assert_json_error(resp, status, contains=None):
    """resp (requests.Response or RawResponse) has the given status and a JSON error body
    {"status": status, "message": "<non-empty>"}."""
    body = resp.content if hasattr(resp, "content") else resp.body
    assert resp.status_code == status, "want %d, got %d: %r" % (status, resp.status_code, body[:300])
    ctype = resp.headers.get("Content-Type", resp.headers.get("content-type", ""))
    assert ctype.startswith("application/json"), "error Content-Type is %r" % ctype
    try:
        j = json.loads(body)
    except ValueError:
        raise AssertionError("error body is not JSON: %r" % body[:300]) from None
    assert isinstance(j, dict), j
    assert j.get("status") == status, "JSON status %r != %d" % (j.get("status"), status)
    msg = j.get("message")
    assert isinstance(msg, str) and msg.strip(), "empty error message: %r" % j
    if contains is not None:
        assert contains.lower() in msg.lower(), "message %r lacks %r" % (msg, contains)
    return j


# ---- checksums ----
_xxh = None


def _libxxhash():
    global _xxh
    if _xxh is None:
        name = ctypes.util.find_library("xxhash") or "libxxhash.so.0"
        lib = ctypes.CDLL(name)
        lib.XXH64.restype = ctypes.c_uint64
        lib.XXH64.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint64)
        lib.XXH3_64bits.restype = ctypes.c_uint64
        lib.XXH3_64bits.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
        _xxh = lib
    return _xxh


def xxh64_hex(data, seed=0):
    """xxhash64 of data as 16 lowercase hex digits (the canonical big-endian form)."""
    buf = ctypes.create_string_buffer(bytes(data), len(data))
    return "%016x" % _libxxhash().XXH64(buf, len(data), seed)


def xxh3_hex(data):
    """XXH3 64-bit (seed 0) of data as 16 lowercase hex digits, big-endian (the libxxhash one-shot call)."""
    buf = ctypes.create_string_buffer(bytes(data), len(data))
    return "%016x" % _libxxhash().XXH3_64bits(buf, len(data))


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C = _crc32c_table()


def crc32c_hex(data):
    """CRC-32C (Castagnoli, reflected 0x1EDC6F41, init and xorout all ones) as 8 lowercase hex digits."""
    crc = 0xFFFFFFFF
    for b in bytes(data):
        crc = _CRC32C[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return "%08x" % (crc ^ 0xFFFFFFFF)


def md5_hex(data):
    return hashlib.md5(data).hexdigest()


CKSUM_TYPES = ("xxhash", "md5", "xxh3", "crc32c", "sha256", "sha512")


def cksum_hex(kind, data):
    """The Ais-Checksum-Value of data in a bucket whose checksum type is kind."""
    return {"xxhash": xxh64_hex, "md5": md5_hex, "xxh3": xxh3_hex, "crc32c": crc32c_hex,
            "sha256": lambda d: hashlib.sha256(d).hexdigest(),
            "sha512": lambda d: hashlib.sha512(d).hexdigest()}[kind](data)


# ---- native API ----
class Api:
    """Native API calls against one proxy URL with one session (not thread-safe: one per thread)."""

    def __init__(self, url, sess=None, token=None):
        self.url = url.rstrip("/")
        self.s = sess or session(token)

    def create_bucket(self, bucket, cksum=None, expect=200):
        body = {"action": "create-bck"}
        if cksum:
            body["value"] = {"checksum": {"type": cksum}}
        r = self.s.post(self.url + bucket_path(bucket), json=body, timeout=TIMEOUT)
        if expect is not None:
            assert r.status_code == expect, "create %s: %d %r" % (bucket, r.status_code, r.text)
        return r

    def destroy_bucket(self, bucket, expect=200):
        r = self.s.delete(self.url + bucket_path(bucket), timeout=TIMEOUT)
        if expect is not None:
            assert r.status_code == expect, "destroy %s: %d %r" % (bucket, r.status_code, r.text)
        return r

    def owner(self, bucket, name):
        """The owning target's URL for the object (Location of the proxy's 307, with path)."""
        r = self.s.get(self.url + obj_path(bucket, name), allow_redirects=False, timeout=TIMEOUT)
        assert r.status_code == 307, "GET %s/%s at proxy: %d %r" % (bucket, name, r.status_code,
                                                                    r.text)
        return r.headers["Location"]

    def put(self, bucket, name, data, headers=None, expect=200):
        """PUT through the proxy: first to the proxy, then the body again to the 307 Location
        (as a client must). Returns the target's response."""
        r = self.s.put(self.url + obj_path(bucket, name), data=data, headers=headers,
                       allow_redirects=False, timeout=TIMEOUT)
        assert r.status_code == 307, "PUT %s/%s at proxy: %d %r" % (bucket, name, r.status_code,
                                                                    r.text)
        loc = r.headers["Location"]
        r = self.s.put(loc, data=data, headers=headers, allow_redirects=False, timeout=TIMEOUT)
        if expect is not None:
            assert r.status_code == expect, "PUT %s: %d %r" % (loc, r.status_code, r.text)
        return r

    def get(self, bucket, name, headers=None, **kw):
        return self.s.get(self.url + obj_path(bucket, name), headers=headers, timeout=TIMEOUT,
                          **kw)

    def head(self, bucket, name, **kw):
        kw.setdefault("allow_redirects", True)
        return self.s.head(self.url + obj_path(bucket, name), timeout=TIMEOUT, **kw)

    def delete(self, bucket, name, **kw):
        r = self.s.delete(self.url + obj_path(bucket, name), allow_redirects=False,
                          timeout=TIMEOUT)
        if r.status_code == 307:
            r = self.s.delete(r.headers["Location"], allow_redirects=False, timeout=TIMEOUT)
        return r

    def smap(self):
        r = self.s.get(self.url + "/v1/cluster?what=smap", timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        return r.json()

    def bmd(self):
        r = self.s.get(self.url + "/v1/cluster?what=bmd", timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        return r.json()

    def list_page(self, bucket, prefix=None, pagesize=None, token=None):
        params = {}
        if prefix is not None:
            params["prefix"] = prefix
        if pagesize is not None:
            params["pagesize"] = str(pagesize)
        if token is not None:
            params["continuation_token"] = token
        return self.s.get(self.url + bucket_path(bucket), params=params, timeout=TIMEOUT)

    def list_all(self, bucket, prefix=None, pagesize=None, max_pages=100000):
        """Every entry, following continuation tokens. Returns (entries, pages). Fails on a page
        larger than pagesize or a token that does not move forward."""
        entries, token, pages = [], None, 0
        while True:
            r = self.list_page(bucket, prefix, pagesize, token)
            assert r.status_code == 200, "list %s: %d %r" % (bucket, r.status_code, r.text)
            j = r.json()
            page = j["entries"]
            pages += 1
            if pagesize:
                assert len(page) <= pagesize, "page of %d > pagesize %d" % (len(page), pagesize)
            entries.extend(page)
            nxt = j.get("continuation_token", "")
            if not nxt:
                return entries, pages
            assert page, "empty page with continuation token %r" % nxt
            assert nxt != token, "continuation token %r does not advance" % nxt
            token = nxt
            assert pages < max_pages, "more than %d pages" % max_pages


def wait_until(fn, timeout, interval=0.05, what="condition"):
    """Polls fn() until it returns a truthy value; returns it, or raises AssertionError."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError("timed out after %.1f s waiting for %s (last: %r)" % (timeout, what, last))


# ---- jobs, remote buckets ----
def wait_job(where, job_id, timeout=60):
    """Polls GET /v1/jobs/job_id on where.url (a cluster handle or an Api) until the job's state is no longer
    "running"; returns its last status (a dict). Every poll must answer 200; AssertionError after timeout seconds."""
    s = session(getattr(where, "token", None))
    st = {}

    def done():
        r = s.get("%s/v1/jobs/%s" % (where.url, job_id), timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        st.clear()
        st.update(r.json())
        return st["state"] != "running"
    wait_until(done, timeout, interval=0.1, what="job %s ends" % job_id)
    return st


def add_keys(h, keys):
    """Adds keys ({access key: {"secret", "role"[, "buckets"]}}) to a local cluster's identity store
    (DIR/s3keys.json; auth on), restarts the proxy, which reads the store at its start, and returns
    {access key: a token of it}."""
    path = os.path.join(h.c.dir, "s3keys.json")
    with open(path) as f:
        doc = json.load(f)
    doc.update(keys)
    with open(path, "w") as f:
        json.dump(doc, f)
    p = h.c.proxy
    p.signal(15)
    assert p.wait_dead(10)
    p.spawn(h.c.env)
    h.c.wait_ready(30)
    tokens = {}
    for access_key, k in keys.items():
        r = session(token="").post(h.url + "/v1/tokens", json={"access_key": access_key, "secret_key": k["secret"]},
                                   timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        tokens[access_key] = r.json()["token"]
    return tokens


def add_key(h, access_key, secret, role):
    """add_keys of one key of role: its token."""
    return add_keys(h, {access_key: {"secret": secret, "role": role}})[access_key]


def create_remote(url, bucket, provider, backend, expect=200, token=None, cksum=None):
    """Creates the remote bucket provider://bucket with the given backend settings (and checksum type); asserts the
    status; returns the response."""
    value = {"backend": backend}
    if cksum:
        value["checksum"] = {"type": cksum}
    r = session(token).post("%s/v1/buckets/%s?provider=%s" % (url, bucket, provider),
                            json={"action": "create-bck", "value": value}, timeout=TIMEOUT)
    assert r.status_code == expect, r.text
    return r


def obj_url(url, bucket, name, provider="ht", extra=""):
    """URL of object name of the remote bucket provider://bucket; extra is appended to the query ("&k=v")."""
    return "%s/v1/objects/%s/%s?provider=%s%s" % (url, bucket, quote_name(name), provider, extra)


# ---- raw HTTP/1.1 ----
class RawResponse:
    def __init__(self, status, reason, headers, body, head_raw):
        self.status_code = status
        self.reason = reason
        self.header_list = headers
        self.headers = _CaseInsensitive(headers)
        self.body = body
        self.content = body
        self.head_raw = head_raw

    def json(self):
        return json.loads(self.body)


class _CaseInsensitive(dict):
    def __init__(self, pairs):
        super().__init__()
        for k, v in pairs:
            super().__setitem__(k.lower(), v)

    def __getitem__(self, k):
        return super().__getitem__(k.lower())

    def get(self, k, default=None):
        return super().get(k.lower(), default)

    def __contains__(self, k):
        return super().__contains__(k.lower())


class RawConn:
    """One TCP connection speaking HTTP/1.1 by hand: exact bytes out, strict parsing in."""

    def __init__(self, url_or_host, port=None, timeout=10.0):
        if port is None:
            u = urllib.parse.urlsplit(url_or_host)
            host, port = u.hostname, u.port
        else:
            host = url_or_host
        self.host, self.port = host, port
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()  # appended in place: a bytes += per recv made a large body's read quadratic

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, data):
        self.sock.sendall(data)

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError("connection closed by server")
        self.buf += chunk

    def _read_until(self, sep, limit=1 << 20):
        while sep not in self.buf:
            if len(self.buf) > limit:
                raise AssertionError("no %r within %d bytes" % (sep, limit))
            self._fill()
        return self._take(self.buf.index(sep) + len(sep))

    def _take(self, n):
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def _read_exact(self, n):
        while len(self.buf) < n:
            self._fill()
        return self._take(n)

    def read_response(self, method="GET"):
        """Reads one response (a 1xx is returned as such). Raises EOFError if the server closed
        the connection before a complete response."""
        head = self._read_until(b"\r\n\r\n")
        lines = head[:-4].decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        assert parts[0] in ("HTTP/1.1", "HTTP/1.0"), "bad status line %r" % lines[0]
        status = int(parts[1])
        reason = parts[2] if len(parts) > 2 else ""
        headers = []
        for line in lines[1:]:
            name, _, value = line.partition(":")
            assert name and name == name.strip(), "bad header line %r" % line
            headers.append((name, value.strip()))
        h = _CaseInsensitive(headers)
        if 100 <= status < 200 or status in (204, 304) or method == "HEAD":
            body = b""
        elif "chunked" in h.get("transfer-encoding", "").lower():
            body = self._read_chunked()
        elif "content-length" in h:
            body = self._read_exact(int(h["content-length"]))
        else:
            body = self.read_to_close()
        return RawResponse(status, reason, headers, body, head)

    def _read_chunked(self):
        body = bytearray()
        while True:
            size_line = self._read_until(b"\r\n").decode("latin-1")
            size = int(size_line.split(";")[0].strip(), 16)
            if size == 0:
                while self._read_until(b"\r\n") != b"\r\n":
                    pass
                return bytes(body)
            body += self._read_exact(size)
            assert self._read_exact(2) == b"\r\n", "bad chunk terminator"

    def read_to_close(self):
        while True:
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                return self._take(len(self.buf))
            self.buf += chunk

    def closed_by_peer(self, timeout=2.0):
        """True when the server closes the connection (EOF or reset) within timeout with no
        further bytes; False if it stays open; raises if unexpected bytes arrive."""
        if self.buf:
            raise AssertionError("unexpected bytes pending: %r" % self.buf[:200])
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            return False
        except ConnectionResetError:
            return True
        if data:
            raise AssertionError("unexpected bytes from server: %r" % data[:200])
        return True


def raw_request(method, path, host_header, headers=(), body=b""):
    """Bytes of one request; Content-Length is added when a body is given and none is set."""
    lines = ["%s %s HTTP/1.1" % (method, path), "Host: %s" % host_header]
    names = {k.lower() for k, _ in headers}
    lines += ["%s: %s" % (k, v) for k, v in headers]
    if body and "content-length" not in names and "transfer-encoding" not in names:
        lines.append("Content-Length: %d" % len(body))
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def hostport(url):
    u = urllib.parse.urlsplit(url)
    return u.hostname, u.port


def recv_until_closed(sock):
    """Every byte the peer sends on sock until it closes."""
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


# ---- objects on disk, target control port (rebalance and resilver tests) ----
def objects_on_disk(mountpaths, bucket, provider="ais"):
    """{object name: [mountpath, ...]} of the published objects of bucket found under the given
    mountpaths ("<mp>/<provider>/<bucket>/<name>"; .work, .copies and .ec are not looked at)."""
    found = {}
    for mp in mountpaths:
        top = os.path.join(mp, provider, bucket)
        for dirpath, _, files in os.walk(top):
            for f in files:
                name = os.path.relpath(os.path.join(dirpath, f), top)
                found.setdefault(name, []).append(mp)
    return found


def ctl(method, url, path, body=None, params=None, expect=200):
    """A call to a target's control port; returns the parsed JSON body (None when empty)."""
    r = requests.request(method, url.rstrip("/") + path, json=body, params=params, timeout=TIMEOUT)
    if expect is not None:
        assert r.status_code == expect, "%s %s%s: %d %r" % (method, url, path, r.status_code,
                                                           r.text[:500])
    return r.json() if r.content else None
