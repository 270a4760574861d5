# SPDX-License-Identifier: Apache-2.0
# Rebalance and resilver with a target SIGKILLed mid-run: nothing lost, torn or doubled, no work file, a clean re-run.
import hashlib
import os
import shutil
import signal
import tempfile

import pytest

from conftest import module_cluster
from ftutil import TIMEOUT, Api, ctl, objects_on_disk, session, unique, wait_job, wait_until

GRACE_S = 3          # the proxy's job_missing_grace_s: a part missing this long after the others ended is incomplete
END_S = 60           # every wait for an end (not a speed check)
CHUNK = 8 << 20      # a rebalance transfer's chunk (RB_CHUNK)
BIG = 3 * CHUNK + 4096  # four PUTs to the receiver: a partial transfer file lives a while on its .work
N_SMALL = 150
N_PROTECTED = 20  # objects of a mirrored bucket (2 copies on the owner's mountpaths), and of an EC 1+1 one

kc = module_cluster("rbkills", "these tests kill targets and look at their disks", targets=3, mountpaths=2,
                    proxy_args=["--job_missing_grace_s", str(GRACE_S)])


def body(name, size):
    seed = hashlib.sha256(name.encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def cluster_put(h, act, value):
    r = session().put(h.url + "/v1/cluster", json={"action": act, "value": value}, timeout=TIMEOUT)
    assert r.status_code in (200, 202), r.text
    return r.text


def set_rebalance(h, action):
    for t in h.targets():
        ctl("POST", t["control_url"], "/v1/rebalance", {"action": action})


def owner_id(h, api, bucket, name):
    r = api.s.get("%s/v1/objects/%s/%s" % (api.url, bucket, name), allow_redirects=False, timeout=TIMEOUT)
    assert r.status_code == 307, r.text
    loc = r.headers["Location"]
    for t in h.targets():
        if loc.startswith(t["public_url"] + "/"):
            return t["id"]
    raise AssertionError("%s is no target's" % loc)


def owned_names(h, api, bucket, tid, fmt, n):
    """The first n names fmt % 0, fmt % 1, ... that target tid owns in bucket."""
    out = []
    for i in range(100 * n):
        name = fmt % i
        if owner_id(h, api, bucket, name) == tid:
            out.append(name)
            if len(out) == n:
                return out
    raise AssertionError("target %s owns %d of %d names" % (tid, len(out), 100 * n))


def index_of(h, tid):
    return [t.id for t in h.c.targets].index(tid)


class Dataset:
    """Buckets whose objects owned by target `receiver` sit on the other targets (put while it was in maintenance,
    the rebalance held back everywhere); the big objects are all on `sender`, on their way to `receiver`."""

    def __init__(self, h, api, tag):
        self.h, self.api = h, api
        self.plain, self.mirrored, self.ec = unique(tag), unique(tag + "-m"), unique(tag + "-ec")
        self.want = {}  # (bucket, name) -> size
        api.create_bucket(self.plain)
        for b, props in ((self.mirrored, {"mirror": {"copies": 2}}),
                         (self.ec, {"ec": {"data_slices": 1, "parity_slices": 1, "objsize_limit": 0}})):
            r = api.s.post("%s/v1/buckets/%s" % (api.url, b), timeout=TIMEOUT,
                           json={"action": "create-bck", "value": props})
            assert r.status_code == 200, r.text
        ts = h.targets()
        self.receiver, self.sender = ts[0]["id"], ts[1]["id"]
        set_rebalance(h, "disable")
        owned = owned_names(h, api, self.plain, self.receiver, "big-%03d", 24)
        cluster_put(h, "start-maintenance", {"sid": self.receiver})
        self.bigs = [n for n in owned if owner_id(h, api, self.plain, n) == self.sender][:2]
        assert len(self.bigs) == 2, owned
        for n in self.bigs:
            self.put(self.plain, n, BIG)
        for i in range(N_SMALL):
            self.put(self.plain, "s/%04d" % i, 1 + (i * 7919) % (48 << 10))
        for i in range(N_PROTECTED):
            self.put(self.mirrored, "m/%03d" % i, 1 + (i * 104729) % (32 << 10))
            self.put(self.ec, "e/%03d" % i, 1 + (i * 15485863) % (32 << 10))
        cluster_put(h, "stop-maintenance", {"sid": self.receiver})

    def put(self, bucket, name, size):
        self.api.put(bucket, name, body(name, size))
        self.want[(bucket, name)] = size

    def on_disk(self):
        """{(bucket, name): [target index, ...]} of the published objects on every target's mountpaths; each copy
        must hold the object's exact bytes."""
        out = {}
        for b in (self.plain, self.mirrored, self.ec):
            for i, t in enumerate(self.h.c.targets):
                for name, mps in objects_on_disk(t.mountpaths, b).items():
                    assert (b, name) in self.want, "unexpected object %s/%s" % (b, name)
                    for mp in mps:
                        with open(os.path.join(mp, "ais", b, name), "rb") as f:
                            data = f.read()
                        assert data == body(name, self.want[(b, name)]), \
                            "%s/%s torn on %s (%d bytes)" % (b, name, mp, len(data))
                        out.setdefault((b, name), []).append(i)
        return out

    def check_whole(self, down=None):
        """Nothing lost or torn on disk, every object read through the proxy with its exact bytes (but those of the
        plain and mirrored buckets only target index down holds: their copies are all on it while it is down)."""
        on = self.on_disk()
        lost = sorted(set(self.want) - set(on))
        assert not lost, "%d objects lost, e.g. %s" % (len(lost), lost[:5])
        for (b, name), size in self.want.items():
            if on[(b, name)] == [down] and b != self.ec:
                continue
            r = self.api.get(b, name)
            assert r.status_code == 200 and r.content == body(name, size), (b, name, r.status_code, len(r.content))
        return on

    def check_placed(self):
        """Every object once, on its HRW owner."""
        on = self.check_whole()
        ids = [t.id for t in self.h.c.targets]
        for (b, name), where in on.items():
            assert len(where) == 1, "%s/%s on targets %s" % (b, name, [ids[i] for i in where])
            assert ids[where[0]] == owner_id(self.h, self.api, b, name), "%s/%s not on its owner" % (b, name)


def partial_transfers(h, index):
    """Transfer work files (.work/rb.<xfer>) on a target's mountpaths with at least one chunk but not all."""
    out = []
    for mp in h.c.targets[index].mountpaths:
        d = os.path.join(mp, ".work")
        for f in os.listdir(d) if os.path.isdir(d) else []:
            if f.startswith("rb.") and not f.startswith("rb.local."):
                try:
                    if CHUNK <= os.stat(os.path.join(d, f)).st_size < BIG:
                        out.append(f)
                except FileNotFoundError:
                    pass
    return out


def start_rebalance(h):
    r = session().put(h.url + "/v1/cluster", json={"action": "start", "value": {"kind": "rebalance"}},
                      timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return r.text


def job_state(h, jid):
    r = session().get("%s/v1/jobs/%s" % (h.url, jid), timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return r.json()


def local_rebalance_ended(t):
    """The target's last rebalance (its own, after a map change, or an operator's) is not running."""
    st = ctl("GET", t["control_url"], "/v1/rebalance")
    if st.get("job"):
        j = ctl("GET", t["control_url"], "/v1/jobs/" + st["job"], expect=None) or {}
        return j.get("state") != "running"
    return st["state"] != "running"


@pytest.mark.parametrize("role", ["sender", "receiver"])
def test_rebalance_with_a_target_killed(kc, role):
    """SIGKILL of the target sending (or receiving) a multi-chunk object in the middle of a rebalance job over a
    plain, a mirrored and an EC 1+1 bucket: no object lost or torn, the EC objects and the others' copies served
    while it is down, the job ends incomplete naming it, no transfer work file stays on any target; once it is back
    a new rebalance completes and every object is once on its HRW owner, read back whole."""
    h = kc
    api = Api(h.url, session())
    ds = Dataset(h, api, "rbk" + role[0])
    victim_id = ds.sender if role == "sender" else ds.receiver
    victim = index_of(h, victim_id)
    receiver = index_of(h, ds.receiver)
    try:
        jid = start_rebalance(h)
        # the kill lands while a big object is between its first and last chunk on the receiver
        wait_until(lambda: partial_transfers(h, receiver), END_S, interval=0.002, what="a transfer under way")
        h.kill_target(victim, "KILL")
        d = job_state(h, jid)
        print("\n%s: killed %s at %d of %d objects moved" % (role, victim_id, d["objects"], d["total"]))
        assert d["state"] == "running", d
        wait_until(lambda: victim_id not in [t["id"] for t in h.targets()], 30, what="the victim out of the map")
        ds.check_whole(down=victim)  # the others serve what they hold meanwhile
        st = wait_job(h, jid, timeout=END_S)
        assert st["state"] == "incomplete" and victim_id in st.get("missing", []), st
        others = [i for i in range(len(h.c.targets)) if i != victim]
        wait_until(lambda: h.work_files(others) == [], 10, interval=0.1, what="no work file on the others")
        h.restart_target(victim)
        wait_until(lambda: len(h.targets()) == 3, 30, what="the victim back in the map")
        wait_until(lambda: all(local_rebalance_ended(t) for t in h.targets()), END_S, interval=0.1,
                   what="the rebalance of the rejoin ended")
        st = wait_job(h, start_rebalance(h), timeout=END_S)
        assert st["state"] == "finished" and st["errors"] == 0, st
        ds.check_placed()
        assert h.work_files() == []
    finally:
        set_rebalance(h, "enable")


MB = 1 << 20
N_RESILVER = 45  # 1 MiB objects on the target, about a third moved to an attached mountpath, then all of it back


def resilver_doc(t, s):
    r = s.get(t.control_url + "/v1/mountpaths", timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return r.json()


def freeze(node):
    """SIGSTOP, and waits until every thread of the process is stopped (the signal is delivered asynchronously)."""
    node.signal(signal.SIGSTOP)
    task = "/proc/%d/task" % node.pid

    def stopped():
        for tid in os.listdir(task):
            try:
                with open("%s/%s/stat" % (task, tid)) as f:
                    if f.read().rsplit(")", 1)[1].split()[0] not in "tT":
                        return False
            except FileNotFoundError:
                pass
        return True
    wait_until(stopped, 10, interval=0.0002, what="the target stopped")


def moves_in_work(t):
    """The work files on the target's mountpaths: with no PUT running, those of resilver moves (.work/rb.local.N, an
    object linked there on its way; .work/put.P.N, a copy across filesystems being written)."""
    return [f for mp in t.mountpaths if os.path.isdir(os.path.join(mp, ".work"))
            for f in os.listdir(os.path.join(mp, ".work")) if f.startswith(("rb.local.", "put."))]


def kill_mid_resilver(h, index, rid):
    """SIGKILLs target index, frozen while its resilver rid has an object in a move's work file; returns those
    files, or None when the resilver ended before a freeze found one (the target then runs on). The target runs
    while its status is asked between two freezes."""
    t, s = h.c.targets[index], session()
    while True:
        freeze(t)
        caught = moves_in_work(t)
        if caught:
            h.kill_target(index, "KILL")  # frozen: killed in that very state
            return caught
        t.signal(signal.SIGCONT)
        d = resilver_doc(t, s)["resilver"]
        if d["id"] == rid and d["state"] != "running":
            return None


def kill_in_a_change(h, index, path, first, tries=10):
    """Attaches or detaches path on target index (first `first`, then the other way, and so on) until a change's
    resilver is caught with a move under way and the target killed; returns (the action, the work files seen)."""
    t = h.c.targets[index]
    for i in range(tries):
        act = first if i % 2 == 0 else {"attach": "detach", "detach": "attach"}[first]
        j = ctl("POST", t.control_url, "/v1/mountpaths", {"action": act, "path": path},
                expect=200 if act == "attach" else 202)
        caught = kill_mid_resilver(h, index, j["resilver_id"])
        if caught:
            return act, caught
    raise AssertionError("no freeze found a move under way in %d mountpath changes" % tries)


def detached(t, rid, left):
    d = resilver_doc(t, session())
    return d["resilver"]["id"] == rid and d["resilver"]["state"] == "finished" and \
        sorted(m["path"] for m in d["mountpaths"]) == sorted(left)


def mountpath_list(t):
    return [m["path"] for m in resilver_doc(t, session())["mountpaths"]]


def check_mountpaths(t, bucket, want, active, size=MB):
    """Every object of want once on the target's mountpaths, on an active one, with its exact bytes."""
    on = objects_on_disk(t.mountpaths, bucket)
    assert sorted(on) == sorted(want), "lost: %s, extra: %s" % (sorted(set(want) - set(on))[:5],
                                                              sorted(set(on) - set(want))[:5])
    for name, mps in on.items():
        assert len(mps) == 1, "%s on mountpaths %s" % (name, mps)
        assert mps[0] in active, "%s left on %s" % (name, mps[0])
        with open(os.path.join(mps[0], "ais", bucket, name), "rb") as f:
            assert f.read() == body(name, size), "%s torn on %s" % (name, mps[0])
    return on


def check_torn_or_lost(t, bucket, want, size=MB):
    """Right after a kill: every object still somewhere on the target's mountpaths, every copy whole."""
    on = objects_on_disk(t.mountpaths, bucket)
    assert sorted(on) == sorted(want), "lost: %s" % sorted(set(want) - set(on))[:5]
    for name, mps in on.items():
        for mp in mps:
            with open(os.path.join(mp, "ais", bucket, name), "rb") as f:
                assert f.read() == body(name, size), "%s torn on %s" % (name, mp)


def settle(h, api, bucket, want, index, size=MB):
    """After the restart of target index: the rebalance of its rejoin (which moves objects between its mountpaths
    too) ends, and leaves nothing for a rebalance job to move; every object reads back whole."""
    t = h.targets()[[x["id"] for x in h.targets()].index(h.c.targets[index].id)]

    def rejoin_done():
        st = ctl("GET", t["control_url"], "/v1/rebalance")
        return st["id"].startswith("rebalance-") and local_rebalance_ended(t)
    wait_until(rejoin_done, END_S, interval=0.05, what="the rebalance of the rejoin ended")
    st = wait_job(h, start_rebalance(h), timeout=END_S)
    assert st["state"] == "finished" and st["errors"] == 0 and st["objects"] == 0, st
    for n in want:
        g = api.get(bucket, n)
        assert g.status_code == 200 and g.content == body(n, size), (n, g.status_code, len(g.content))


def test_resilver_with_the_target_killed(kc):
    """SIGKILL of a target frozen in the middle of an object's copy to another filesystem, in the resilver of an
    attach, then of a detach: right after each kill no object is lost or torn; on restart an attach is kept, an
    interrupted detach is not (the mountpath is active again), the rebalance of the rejoin completes the moves
    (a rebalance job then finds nothing to move), every object is once on the target, on an active mountpath, read
    back whole, and no work file is left; a detach asked again completes."""
    shm = "/dev/shm"
    if not os.path.isdir(shm) or not os.access(shm, os.W_OK):
        pytest.skip("no writable /dev/shm: a mountpath on a second filesystem makes each move a copy")
    h = kc
    api = Api(h.url, session())
    rid = h.targets()[2]["id"]
    r = index_of(h, rid)
    t = h.c.targets[r]
    if os.stat(shm).st_dev == os.stat(t.mountpaths[0]).st_dev:
        pytest.skip("/dev/shm is on the same filesystem as the test directory")
    bucket = unique("rsk")
    api.create_bucket(bucket)
    want = owned_names(h, api, bucket, rid, "o-%04d", N_RESILVER)
    for n in want:
        api.put(bucket, n, body(n, MB))
    old = list(t.mountpaths)
    base = tempfile.mkdtemp(prefix="ft-rsk-", dir=shm)
    new = os.path.join(base, "mp")
    try:
        t.mountpaths.append(new)  # where check_* look
        for first in ("attach", "detach"):
            # a third of the objects go to the new mountpath, then all of them away: a kill in the middle
            act, caught = kill_in_a_change(h, r, new, first)
            print("%s%s: killed with %s" % ("\n" if first == "attach" else "", act, caught))
            check_torn_or_lost(t, bucket, want)
            h.restart_target(r)
            assert sorted(mountpath_list(t)) == sorted(old + [new])  # an attach is kept, a detach not
            wait_until(lambda: len(h.targets()) == 3, 30, what="the target back in the map")
            settle(h, api, bucket, want, r)
            on = check_mountpaths(t, bucket, want, old + [new])
            assert any(v == [new] for v in on.values()), "nothing on the attached mountpath"
            assert h.work_files([r]) == []
        j = ctl("POST", t.control_url, "/v1/mountpaths", {"action": "detach", "path": new}, expect=202)
        wait_until(lambda: detached(t, j["resilver_id"], old), END_S, interval=0.05, what="the detach done")
        assert resilver_doc(t, session())["resilver"]["errors"] == 0
        check_mountpaths(t, bucket, want, old)
        for n in want:
            g = api.get(bucket, n)
            assert g.status_code == 200 and g.content == body(n, MB), (n, g.status_code, len(g.content))
        assert h.work_files([r]) == []
    finally:
        if t.alive():
            t.signal(signal.SIGCONT)
        if new in t.mountpaths:
            t.mountpaths.remove(new)
        shutil.rmtree(base, ignore_errors=True)


def test_resilver_killed_between_the_moves_of_an_object(kc):
    """A resilver on one filesystem moves each object by name (no copy): SIGKILL of the target frozen (SIGSTOP) while
    an object is in a move's work file (.work/rb.local.N) loses nothing, neither right after the kill nor after the
    restart (which empties .work); the moves are then completed, every object once on an active mountpath."""
    h = kc
    api = Api(h.url, session())
    rid = h.targets()[1]["id"]
    r = index_of(h, rid)
    t = h.c.targets[r]
    bucket = unique("rsm")
    api.create_bucket(bucket)
    # each name in directories of its own: a move creates them on the new mountpath between its link and its rename
    want = owned_names(h, api, bucket, rid, "d%04d/a/b/c/o", 150)
    for n in want:
        api.put(bucket, n, body(n, MB // 1024))
    old = list(t.mountpaths)
    new = os.path.join(os.path.dirname(old[0]), "mp-same-fs")
    t.mountpaths.append(new)  # where check_* look
    caught = None
    try:
        act, caught = kill_in_a_change(h, r, new, "attach")
        print("\nkilled during a %s, with %s" % (act, caught))
        check_torn_or_lost(t, bucket, want, MB // 1024)
        h.restart_target(r)
        wait_until(lambda: len(h.targets()) == 3, 30, what="the target back in the map")
        settle(h, api, bucket, want, r, MB // 1024)
        check_mountpaths(t, bucket, want, old + [new] if new in mountpath_list(t) else old, MB // 1024)
        assert h.work_files([r]) == []
    finally:
        if t.alive():
            t.signal(signal.SIGCONT)
        if t.alive() and new in mountpath_list(t):
            j = ctl("POST", t.control_url, "/v1/mountpaths", {"action": "detach", "path": new}, expect=202)
            wait_until(lambda: detached(t, j["resilver_id"], old), END_S, interval=0.05, what="the detach done")
        t.mountpaths.remove(new)
