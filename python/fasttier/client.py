# SPDX-License-Identifier: Apache-2.0
# The HTTP client of a FastTier cluster's proxy: order hints, object and shard reads, listings, GetBatch.
"""
Client(url) talks to one proxy. Every failure is a FastTierError whose message names the request and
says what went wrong: the proxy's JSON error message and status, or the transport error. Arguments
are checked before anything is sent, with the same limits the proxy applies (docs/api.md "Order
hints"), so a bad call fails at once with a ValueError or TypeError naming the argument.
"""
import json
import os
import re
import urllib.parse

import requests

DEFAULT_TIMEOUT = 60.0
_JOB = re.compile(r"^[A-Za-z0-9._-]{1,63}$")
MAX_TTL_S = 604800


# Query keys whose values say where, never who (as common/base/redact.c keeps them).
_KEPT_KEYS = ("provider", "mpu", "part")
_USERINFO = re.compile(r"(?<=//)[^/\s@?#]*@")
_QUERY_ITEM = re.compile(r"([?&])([^=&\s#/'\"]+)=([^&\s#'\")]*?)([:,.;]*(?=[&\s#'\")]|$))")


def redact(text):
    """text with every URL in it as messages may show it: no "user:password@", every query value
    "***" but those of provider, mpu and part (a redirect's ft_sig, a presigned URL's signature and
    token). A requests exception's message quotes the URL it failed on, query included."""
    text = _USERINFO.sub("", text)
    return _QUERY_ITEM.sub(lambda m: m.group(0) if m.group(2) in _KEPT_KEYS else "%s%s=***%s" % (
        m.group(1), m.group(2), m.group(4)), text)  # punctuation ending a value is the sentence's


class FastTierError(Exception):
    """A request the cluster refused or that did not reach it.

    status: the HTTP status (None when no answer came); message: the cluster's own message (or the
    transport error); what: the request ("POST http://.../v1/buckets/b?provider=ht"). what and the
    message show URLs through redact(): never a password, signature or token."""

    def __init__(self, what, status, message):
        what, message = redact(what), redact(message)
        self.what, self.status, self.message = what, status, message
        if status is None:
            text = "%s: no answer: %s" % (what, message)
        else:
            text = "%s: %d: %s" % (what, status, message)
        super().__init__(text)


def _error_message(resp):
    """The message of a FastTier JSON error body, else the start of the body as text."""
    try:
        doc = resp.json()
    except ValueError:
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("message"), str):
        return doc["message"]
    text = resp.text.strip()
    return text[:300] if text else resp.reason or "(empty body)"


def _check_names(names):
    """names as a list of non-empty str; raises TypeError/ValueError naming the first bad one."""
    if isinstance(names, (str, bytes)):
        raise TypeError("names must be a sequence of object names, not a single %s" % type(names).__name__)
    out = list(names)
    if not out:
        raise ValueError("names is empty: an order hint lists at least one object name")
    for i, n in enumerate(out):
        if not isinstance(n, str):
            raise TypeError("names[%d] is %s %r, not a str object name" % (i, type(n).__name__, n))
        if not n:
            raise ValueError("names[%d] is an empty object name" % i)
    return out


def find_token(state_dir=None):
    """The access token of a cluster with authentication on: FT_TOKEN from the environment, else the
    file `token` at the top of state_dir (or of FT_STATE_DIR, as `ft-cluster start` writes it), else
    None."""
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


class Client:
    """A FastTier proxy at url ("http://host:port"). timeout: seconds per request; session: a
    requests.Session to use (one is made otherwise); token: the access token sent as
    "Authorization: Bearer" (default: find_token())."""

    def __init__(self, url, timeout=DEFAULT_TIMEOUT, session=None, token=None):
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError("url must be http://host:port of a FastTier proxy, not %s" % (
                redact(repr(url)) if isinstance(url, str) else type(url).__name__))
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.session = session or requests.Session()
        self.token = token if token is not None else find_token()

    def __repr__(self):
        return "fasttier.Client(%s)" % redact(repr(self.url))  # never the token, nor a password in the URL

    def post_order_hint(self, bucket, names, epoch, provider="ais", ttl_s=None, job=None):
        """Tells the cluster the order in which the epoch reads bucket's objects (names, in reading
        order). epoch: int >= 0, never older than the job's last; ttl_s: seconds the hint lives
        (1..604800; the proxy's default 3600 when None); job: the job's name ([A-Za-z0-9._-], 1..63;
        "default" when None). Returns the proxy's reply ({"job", "epoch", "names", "targets"}).
        Raises FastTierError when the cluster refuses it (413: too many names, 409: an older epoch,
        404: no such bucket ...) or cannot be reached."""
        if not isinstance(bucket, str) or not bucket:
            raise ValueError("bucket must be a non-empty str, not %r" % (bucket,))
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ValueError("epoch must be an int >= 0, not %r" % (epoch,))
        value = {"epoch": epoch, "objnames": _check_names(names)}
        if ttl_s is not None:
            if isinstance(ttl_s, bool) or not isinstance(ttl_s, int) or not 1 <= ttl_s <= MAX_TTL_S:
                raise ValueError("ttl_s must be an int in 1..%d, not %r" % (MAX_TTL_S, ttl_s))
            value["ttl_s"] = ttl_s
        if job is not None:
            if not isinstance(job, str) or not _JOB.match(job):
                raise ValueError("job must be 1..63 characters of [A-Za-z0-9._-], not %r" % (job,))
            value["job"] = job
        url = "%s/v1/buckets/%s?provider=%s" % (self.url, urllib.parse.quote(bucket, safe=""),
                                                 urllib.parse.quote(provider, safe=""))
        body = json.dumps({"action": "order-hint", "value": value}, separators=(",", ":"))
        return self._json("POST", url, body)

    def bucket_url(self, bucket, provider="ais", **query):
        """The bucket's URL, query parameters added (None values left out)."""
        q = {"provider": provider}
        q.update((k, v) for k, v in query.items() if v is not None)
        return "%s/v1/buckets/%s?%s" % (self.url, urllib.parse.quote(bucket, safe=""), urllib.parse.urlencode(q))

    def object_url(self, bucket, name, provider="ais", **query):
        """The object's URL (the proxy redirects to its owner), query parameters added (None left out)."""
        q = {"provider": provider}
        q.update((k, v) for k, v in query.items() if v is not None)
        return "%s/v1/objects/%s/%s?%s" % (self.url, urllib.parse.quote(bucket, safe=""),
                                           urllib.parse.quote(name, safe="/"), urllib.parse.urlencode(q))

    def list_objects(self, bucket, prefix=None, provider="ais", archive=False, pagesize=None):
        """Every entry ({"name", "size", ...}) of the bucket under prefix, following the pages;
        archive=True lists the members of shards as "shard/member" too."""
        entries, token = [], None
        while True:
            url = self.bucket_url(bucket, provider, prefix=prefix, continuation_token=token,
                                  archive="true" if archive else None,
                                  pagesize=str(pagesize) if pagesize else None)
            page = self._request("GET", url).json()
            entries.extend(page.get("entries") or [])
            token = page.get("continuation_token") or None
            if not token:
                return entries

    def get(self, bucket, name, provider="ais", archpath=None, stream=False):
        """GET of an object (or, with archpath, of a member of a shard): the requests.Response,
        streamed when stream is true (read resp.raw, then close it). Raises FastTierError when the
        answer is not 200."""
        return self._request("GET", self.object_url(bucket, name, provider, archpath=archpath), stream=stream)

    def get_batch(self, items, continue_on_error=False, stream=True):
        """POST /v1/batch: items is a list of {"bucket", "objname"[, "provider", "archpath", "start",
        "length"]}; the answer is one TAR stream with a member per item, in that order (the
        requests.Response, streamed by default). A missing item fails it (404), or with
        continue_on_error is an empty member "__404__/<bucket>/<objname>[/<archpath>]"."""
        if not items:
            raise ValueError("a batch needs at least one item")
        body = json.dumps({"in": list(items), "continue_on_error": bool(continue_on_error)},
                          separators=(",", ":")).encode()
        # The proxy redirects (307) to the assembling target; requests would drop the token on the way
        # (another port), and a batch's Location is not signed: follow it here, token kept.
        url = "%s/v1/batch" % self.url
        for _ in range(3):
            resp = self._request("POST", url, body, stream=stream, redirect=False)
            if resp.status_code != 307:
                return resp
            url = urllib.parse.urljoin(url, resp.headers.get("Location", ""))
            resp.close()
        raise FastTierError("POST %s" % url, 307, "too many redirects")

    def session_for_worker(self):
        """A copy of this client with its own requests.Session (one per DataLoader worker process)."""
        return Client(self.url, timeout=self.timeout, token=self.token or "")

    def _request(self, method, url, body=None, stream=False, redirect=True):
        what = "%s %s" % (method, url)
        headers = {"Content-Type": "application/json"} if body is not None else {}
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        try:
            resp = self.session.request(method, url, data=body, headers=headers, timeout=self.timeout, stream=stream,
                                        allow_redirects=redirect)
        except requests.RequestException as e:
            raise FastTierError(what, None, str(e)) from None
        if resp.status_code != 200 and not (resp.status_code == 307 and not redirect):
            try:
                raise FastTierError(what, resp.status_code, _error_message(resp))
            finally:
                resp.close()
        return resp

    def _json(self, method, url, body):
        what = "%s %s" % (method, url)
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        try:
            resp = self.session.request(method, url, data=body.encode(), headers=headers, timeout=self.timeout)
        except requests.RequestException as e:
            raise FastTierError(what, None, str(e)) from None
        if resp.status_code != 200:
            raise FastTierError(what, resp.status_code, _error_message(resp))
        try:
            return resp.json()
        except ValueError:
            raise FastTierError(what, resp.status_code, "the reply is not JSON: %r" % resp.text[:200]) from None
