# SPDX-License-Identifier: Apache-2.0
# Batch jobs with a target SIGKILLed mid-job: no torn object or leftover work file, a bounded end, a clean re-run.
import hashlib
import io
import os
import tarfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ftutil import (TIMEOUT, Api, create_remote, ctl, objects_on_disk, session, unique, wait_job,
                    wait_until)

N = 80             # objects a job takes on
SIZE = 24 * 1024   # bytes of each
GRACE_S = 3        # the proxy's job_missing_grace_s: a part missing this long after the others ended is incomplete
END_S = 60         # every wait for a job's end


def body(name):
    """The bytes of object name (at the origin and, copied, anywhere else)."""
    seed = hashlib.sha256(name.encode()).hexdigest().encode()
    return (seed * (SIZE // len(seed) + 1))[:SIZE]


class _Trickle(BaseHTTPRequestHandler):
    """An origin sending body(last path segment) in 4 pieces, DELAY s apart, so a fetch is often cut mid-body."""
    protocol_version = "HTTP/1.1"
    DELAY = 0.06

    def log_message(self, *a):
        pass

    def do_GET(self):
        data = body(self.path.rsplit("/", 1)[-1].split("?", 1)[0])
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command == "HEAD":
            return
        q = len(data) // 4
        try:
            for i in range(4):
                time.sleep(self.DELAY)
                self.wfile.write(data[i * q:(i + 1) * q if i < 3 else len(data)])
                self.wfile.flush()
        except OSError:
            pass

    do_HEAD = do_GET


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a target killed mid-fetch resets its connection


@pytest.fixture(scope="module")
def origin():
    srv = _Server(("127.0.0.1", 0), _Trickle)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield "http://127.0.0.1:%d" % srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def names(tag):
    return ["%s-%03d" % (tag, i) for i in range(N)]


def template(tag):
    return "%s-{000..%03d}" % (tag, N - 1)


def post(api, bucket, action, value, provider=None):
    q = "?provider=" + provider if provider else ""
    r = api.s.post("%s/v1/buckets/%s%s" % (api.url, bucket, q), json={"action": action, "value": value},
                   timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return r.json()["job_id"]


def job_doc(api, jid):
    r = api.s.get("%s/v1/jobs/%s" % (api.url, jid), timeout=TIMEOUT)
    assert r.status_code == 200, r.text  # every poll answers, a target down or not
    return r.json()


def part_state(target, jid):
    """The state of a target's part of job jid (None: it holds none)."""
    return (ctl("GET", target["control_url"], "/v1/jobs/" + jid, expect=None) or {}).get("state")


def fill(api, bucket, tag):
    for n in names(tag):
        api.put(bucket, n, body(n))


def check_tar(data, want_members):
    """data is a whole TAR whose members are whole objects (name -> body(name)); returns the member names."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tf:
        got = []
        for m in tf.getmembers():
            assert m.isfile(), m.name
            content = tf.extractfile(m).read()
            assert content == body(m.name), "member %s torn (%d bytes)" % (m.name, len(content))
            got.append(m.name)
    assert set(got) <= set(want_members), sorted(set(got) - set(want_members))
    return got


# ---- the jobs: each sets its buckets up, starts the job, and says where its results are ----
class Case:
    """provider/bucket where the job's results are stored, the names wanted there, whether they are shards."""

    def __init__(self, h, api, origin, tag):
        self.h, self.api, self.origin, self.tag = h, api, origin, tag
        self.provider, self.bucket, self.want, self.shards = "ais", unique(tag + "-dst"), names(tag), False
        self.victim = None  # index of the target to kill (default: the first target of the map)

    def ht(self):
        b = unique(self.tag + "-ht")
        create_remote(self.api.url, b, "ht", {"endpoint": self.origin})
        return b

    def start(self):
        raise NotImplementedError

    def check_result(self, stored):
        """stored: {name: bytes} of every object under the results bucket on every target's disks."""
        for n, data in stored.items():
            assert n in self.want, "unexpected object %s" % n
            assert data == body(n), "object %s torn on disk (%d of %d bytes)" % (n, len(data), SIZE)


class Prefetch(Case):
    def start(self):
        self.provider = "ht"
        self.bucket = self.ht()
        return post(self.api, self.bucket, "prefetch-listrange", {"template": template(self.tag)}, "ht")


class CopyRemote(Case):
    """copy-listrange of a remote (ht) bucket into an ais bucket: fetch, then PUT to the destination owner."""

    def start(self):
        self.src = getattr(self, "src", None) or self.ht()
        return post(self.api, self.src, "copy-listrange", {"to": {"name": self.bucket}, "template": template(self.tag)},
                    "ht")


class CopyBck(Case):
    """copy-bck between ais buckets; the source is filled first (PUTs), the copy is many local objects."""

    def start(self):
        if not getattr(self, "src", None):
            self.src = unique(self.tag + "-src")
            self.api.create_bucket(self.src)
            fill(self.api, self.src, self.tag)
        return post(self.api, self.src, "copy-bck", {"to": {"name": self.bucket}})


class Etl(CopyBck):
    """copy-bck through a slow command transformer (the identity, 0.05 s an object)."""

    def start(self):
        if not getattr(self, "etl", None):
            self.etl = unique("slowcat")
            r = self.api.s.post(self.api.url + "/v1/etl", timeout=TIMEOUT,
                                json={"name": self.etl, "command": ["sh", "-c", "sleep 0.05; exec cat"]})
            assert r.status_code == 200, r.text
        if not getattr(self, "src", None):
            self.src = unique(self.tag + "-src")
            self.api.create_bucket(self.src)
            fill(self.api, self.src, self.tag)
        return post(self.api, self.src, "copy-bck", {"to": {"name": self.bucket}, "etl": self.etl})


class Download(Case):
    def start(self):
        if not getattr(self, "made", False):
            self.api.create_bucket(self.bucket)
            self.made = True
        return post(self.api, self.bucket, "download", {"urls": ["%s/o/%s" % (self.origin, n) for n in self.want]})


class Archive(Case):
    """archive of the objects of a remote (ht) bucket into one TAR, or (shard_size) into several."""
    shard_size = None

    def start(self):
        self.shards = True
        self.members = names(self.tag)[:30]  # one packer fetches them one by one
        if not getattr(self, "src", None):
            self.src = self.ht()
            self.api.create_bucket(self.bucket)
        value = {"objnames": self.members, "to_bucket": self.bucket}
        if self.shard_size:
            value.update(archname="w-{0000..}.tar", shard_size=self.shard_size)
            self.want = ["w-%04d.tar" % i for i in range(len(self.members) * SIZE // self.shard_size + 1)]
        else:
            value["archname"] = "all.tar"
            self.want = ["all.tar"]
        # the packer is the owner of the first shard: kill it
        self.victim = self.h.index_of_url(self.owner_url(self.want[0]))
        return post(self.api, self.src, "archive", value, "ht")

    def owner_url(self, name):
        r = self.api.s.get("%s/v1/objects/%s/%s" % (self.api.url, self.bucket, name), allow_redirects=False,
                           timeout=TIMEOUT)
        assert r.status_code in (307, 404), r.text
        if r.status_code == 307:
            return r.headers["Location"].split("/v1/")[0]
        return self.h.targets()[0]["public_url"]

    def check_result(self, stored):
        seen = []
        for n, data in stored.items():
            assert n in self.want, "unexpected object %s" % n
            seen += check_tar(data, self.members)
        assert len(seen) == len(set(seen)), "a member in two shards"


class ArchiveShards(Archive):
    shard_size = 4 * SIZE


CASES = {"prefetch": Prefetch, "copy-remote": CopyRemote, "copy-bck": CopyBck, "etl-copy": Etl,
         "download": Download, "archive": Archive, "archive-shards": ArchiveShards}


def stored(h, case):
    """{name: bytes} of every published object of the case's results bucket on every target's disks."""
    out = {}
    on = objects_on_disk(h.all_mountpaths(), case.bucket, case.provider)
    for name, mps in on.items():
        for mp in mps:
            with open(os.path.join(mp, case.provider, case.bucket, name), "rb") as f:
                data = f.read()
            assert out.get(name, data) == data, "copies of %s differ" % name
            out[name] = data
    return out


def check_gets(api, case):
    for n in case.want if not case.shards else []:
        q = "?provider=ht" if case.provider == "ht" else ""
        r = api.s.get("%s/v1/objects/%s/%s%s" % (api.url, case.bucket, n, q), timeout=TIMEOUT)
        assert r.status_code == 200 and r.content == body(n), (n, r.status_code, len(r.content))


def wait_some_done(api, jid, victim_id, case):
    """Until the job has done a few objects, on the victim when it has a part of its own to do."""
    def ready():
        d = job_doc(api, jid)
        assert d["state"] == "running", d
        parts = {p["node"]: p for p in d.get("targets", [])}
        p = parts.get(victim_id, {})
        return (d["objects"] >= 4 and (case.shards or p.get("objects", 0) >= 2)) and d
    return wait_until(ready, 30, interval=0.02, what="the job to get going")


@pytest.mark.parametrize("kind", sorted(CASES))
def test_job_with_a_target_killed_and_restarted(make_cluster, origin, kind):
    """SIGKILL of a target in the middle of a job (the one running it, for an archive): while it is down and after
    its restart no stored result is torn, the job ends within bounds, no work file is left, and a re-run completes
    with every result whole."""
    h = make_cluster(proxy_args=["--job_missing_grace_s", str(GRACE_S)])
    api = Api(h.url, session())
    case = CASES[kind](h, api, origin, kind.replace("-", ""))
    jid = case.start()
    victim = case.victim if case.victim is not None else h.index_of_url(h.targets()[0]["public_url"])
    victim_id = h.c.targets[victim].id
    d = wait_some_done(api, jid, victim_id, case)
    h.kill_target(victim, "KILL")
    print("\n%s: killed %s at %d of %d" % (kind, victim_id, d["objects"], d["total"]))
    case.check_result(stored(h, case))
    # while it is down, the job ends (the missing part named) or keeps running within bounds
    st = wait_job(api, jid, timeout=END_S)
    assert st["state"] in ("incomplete", "failed", "finished"), st
    if st["state"] == "incomplete":
        assert victim_id in st.get("missing", []), st
    assert st["error_samples"] or not st["errors"], st
    print("%s: while down: %s (%d objects, %d errors)" % (kind, st["state"], st["objects"], st["errors"]))
    case.check_result(stored(h, case))
    h.restart_target(victim)
    wait_until(lambda: len(h.targets()) == 3, 30, what="the victim back in the map")
    # after the restart whatever the victim resumes ends too
    st = wait_job(api, jid, timeout=END_S)
    assert st["state"] != "running", st
    print("%s: after the restart: %s" % (kind, st["state"]))
    wait_until(lambda: all(part_state(t, jid) != "running" for t in h.targets()), END_S, interval=0.2,
               what="every part ended")
    case.check_result(stored(h, case))
    assert h.work_files() == []
    # a re-run completes, every result whole
    st = wait_job(api, case.start(), timeout=END_S)
    assert st["state"] == "finished" and st["errors"] == 0, st
    got = stored(h, case)
    case.check_result(got)
    if not case.shards:
        assert sorted(got) == sorted(case.want)
    else:
        members = []
        for n in sorted(got):
            members += check_tar(got[n], case.members)
        assert sorted(members) == sorted(case.members)
    check_gets(api, case)
    assert h.work_files() == []


@pytest.mark.parametrize("kind", ["download", "copy-remote"])
def test_abort_while_a_target_is_down_holds_after_its_restart(make_cluster, origin, kind):
    """A job aborted while one of its targets is down (out of the map) stays aborted when that target comes back:
    the target does not resume its journaled part, and stores nothing more."""
    h = make_cluster(keepalive_ms=300, proxy_args=["--job_missing_grace_s", str(GRACE_S)])
    api = Api(h.url, session())
    case = CASES[kind](h, api, origin, kind.replace("-", ""))
    jid = case.start()
    victim = h.index_of_url(h.targets()[0]["public_url"])
    victim_id = h.c.targets[victim].id
    wait_some_done(api, jid, victim_id, case)
    h.kill_target(victim, "KILL")
    wait_until(lambda: victim_id not in [t["id"] for t in h.targets()], 30, what="the victim out of the map")
    r = api.s.delete("%s/v1/jobs/%s" % (api.url, jid), timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    st = wait_job(api, jid, timeout=END_S)
    assert st["state"] == "aborted", st
    before = sorted(stored(h, case))
    h.restart_target(victim)
    wait_until(lambda: len(h.targets()) == 3, 30, what="the victim back in the map")
    time.sleep(3)
    st = job_doc(api, jid)
    assert st["state"] == "aborted", st
    assert all(p["state"] != "running" for p in st["targets"]), st
    after = sorted(stored(h, case))
    assert after == before, "%d objects stored after the abort" % (len(after) - len(before))
    case.check_result(stored(h, case))
    assert h.work_files() == []
