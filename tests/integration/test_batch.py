# SPDX-License-Identifier: Apache-2.0
# GetBatch across targets: owners' parts streamed and merged in order, ranges and errors of remote items, memory, a killed owner.
import io
import os
import tarfile

import pytest
import requests

from conftest import module_cluster
from ftutil import TIMEOUT, Api, assert_json_error, session, unique
from test_metrics import parse

bcluster = module_cluster("batch", "it reads a target's memory and kills one", targets=2, mountpaths=1)

MIB = 1 << 20
RING = MIB  # TGT_BATCH_PULL_RING: bytes of one owner's part the assembler holds


@pytest.fixture(scope="module")
def api(bcluster):
    return Api(bcluster.url, session())


@pytest.fixture(scope="module")
def bucket(api):
    b = unique("gb")
    api.create_bucket(b)
    return b


def owned(api, h, bucket, prefix, index, count):
    """count object names starting with prefix owned by target index."""
    out, i = [], 0
    while len(out) < count:
        name = "%s%05d" % (prefix, i)
        if h.index_of_url(api.owner(bucket, name)) == index:
            out.append(name)
        i += 1
    return out


def untar(body):
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:") as t:
        return [(m.name, t.extractfile(m).read()) for m in t.getmembers()]


def post(h, index, body, **kw):
    """POST /v1/batch straight to target index: that target assembles."""
    return requests.post(h.c.targets[index].public_url + "/v1/batch", json=body, timeout=TIMEOUT, **kw)


def test_parts_merge_in_order(bcluster, api, bucket):
    """Items of the other target (sizes around TAR blocks, one larger than the ring, ranges) interleave
    with local ones (copied and sendfile'd) in the order asked."""
    sizes = [0, 1, 511, 512, 513, 3 * RING + 7, 100 * 1024]
    remote = owned(api, bcluster, bucket, "r", 1, len(sizes) + 1)
    local = owned(api, bcluster, bucket, "l", 0, 3)
    data = {}
    for name, size in zip(remote, sizes + [4000]):
        data[name] = os.urandom(size)
    for name, size in zip(local, [16 * 1024, 200 * 1024, 10]):
        data[name] = os.urandom(size)
    for name, d in data.items():
        api.put(bucket, name, d)
    order = [local[0], remote[0], local[1], remote[1], local[2]] + remote[2:]
    items = [{"bucket": bucket, "objname": n} for n in order]
    want = [("%s/%s" % (bucket, n), data[n]) for n in order]
    items.append({"bucket": bucket, "objname": remote[-1], "start": 100, "length": 1000})
    want.append(("%s/%s" % (bucket, remote[-1]), data[remote[-1]][100:1100]))
    r = post(bcluster, 0, {"in": items})
    assert r.status_code == 200, r.text[:300]
    assert untar(r.content) == want

    # a remote item missing: 404 before the stream starts, or a __404__/ member in its place
    gone = {"bucket": bucket, "objname": owned(api, bcluster, bucket, "nope", 1, 1)[0]}
    assert_json_error(post(bcluster, 0, {"in": [items[0], gone, items[1]]}), 404, "does not exist")
    r = post(bcluster, 0, {"in": [items[0], gone, items[1]], "continue_on_error": True})
    assert r.status_code == 200
    assert untar(r.content) == [want[0], ("__404__/%s/%s" % (bucket, gone["objname"]), b""), want[1]]
    # a remote range past the end: 416 with the owner's reason
    past = {"bucket": bucket, "objname": remote[2], "start": 10000}
    assert_json_error(post(bcluster, 0, {"in": [past, items[0]]}), 416, "past the end")
    # only_names: the parts carry empty members
    r = post(bcluster, 0, {"in": items[:4], "only_names": True})
    assert untar(r.content) == [(n, b"") for n, _ in want[:4]]


def test_proxy_plans_the_owner_of_most_items(bcluster, api, bucket):
    """The proxy sends the batch to the target owning most of its items (the first item's owner on a tie)."""
    one = owned(api, bcluster, bucket, "p", 0, 2)
    many = owned(api, bcluster, bucket, "q", 1, 3)
    for n in one + many:
        api.put(bucket, n, n.encode())
    for items, want in (([one[0]] + many, 1), ([one[0], many[0]], 0), (one + many[:1], 0)):
        body = {"in": [{"bucket": bucket, "objname": n} for n in items]}
        r = api.s.post(api.url + "/v1/batch", json=body, allow_redirects=False, timeout=TIMEOUT)
        assert r.status_code == 307, r.text
        assert bcluster.index_of_url(r.headers["Location"]) == want, (items, r.headers["Location"])
        r = api.s.post(api.url + "/v1/batch", json=body, timeout=TIMEOUT)
        assert [d for _, d in untar(r.content)] == [n.encode() for n in items]


def drop_cache(h, index, bucket, name):
    """Evicts an object's file from the page cache (synced first, so its pages are clean)."""
    for mp in h.mountpaths(index):
        path = os.path.join(mp, "ais", bucket, name)
        if os.path.exists(path):
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
            return
    raise AssertionError("no file of %s/%s on target %d" % (bucket, name, index))


def test_local_items_from_cache_and_disk(bcluster, api, bucket):
    """Local items read from the page cache in line and, after the first one that needs the disk, read ahead in
    parallel: the bytes are the same either way, in order, with ranges and a missing item."""
    names = owned(api, bcluster, bucket, "c", 0, 40)
    data = {n: os.urandom(1000 + 997 * i) for i, n in enumerate(names)}
    for n, d in data.items():
        api.put(bucket, n, d)
    for n in names[10:30:3]:
        drop_cache(bcluster, 0, bucket, n)
    items = [{"bucket": bucket, "objname": n} for n in names]
    items.insert(20, {"bucket": bucket, "objname": names[25], "start": 7, "length": 100})
    r = post(bcluster, 0, {"in": items})
    assert r.status_code == 200, r.text[:300]
    want = [("%s/%s" % (bucket, n), data[n]) for n in names]
    want.insert(20, ("%s/%s" % (bucket, names[25]), data[names[25]][7:107]))
    assert untar(r.content) == want
    for n in names[:6]:
        drop_cache(bcluster, 0, bucket, n)
    gone = {"bucket": bucket, "objname": owned(api, bcluster, bucket, "cgone", 0, 1)[0]}
    r = post(bcluster, 0, {"in": items[:3] + [gone] + items[3:6], "continue_on_error": True})
    assert r.status_code == 200
    assert untar(r.content) == want[:3] + [("__404__/%s/%s" % (bucket, gone["objname"]), b"")] + want[3:6]


def test_cached_members_written_in_place(bcluster, api, bucket):
    """Cached local items are written with their header and padding straight into the output buffer: sizes
    around TAR blocks and around the 64 KiB in-line limit (65537 goes by sendfile), enough of them to fill
    the 256 KiB buffer many times, in order, here and in the other target's part."""
    sizes = [0, 1, 511, 512, 513, 65535, 65536, 65537, 7] + [16 * 1024 + 3 * i for i in range(48)]
    want = []
    items = []
    for index, prefix in ((0, "w"), (1, "x")):
        for n, size in zip(owned(api, bcluster, bucket, prefix, index, len(sizes)), sizes):
            d = os.urandom(size)
            api.put(bucket, n, d)
            want.append(("%s/%s" % (bucket, n), d))
            items.append({"bucket": bucket, "objname": n})
    order = [j // 2 if j % 2 == 0 else len(sizes) + j // 2 for j in range(2 * len(sizes))]
    r = post(bcluster, 0, {"in": [items[j] for j in order]})
    assert r.status_code == 200, r.text[:300]
    assert untar(r.content) == [want[j] for j in order]
    r = post(bcluster, 1, {"in": items})  # the other way round: target 1 assembles, 0 sends a part
    assert r.status_code == 200, r.text[:300]
    assert untar(r.content) == want


def vm_hwm(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM for %d" % pid)


@pytest.fixture(scope="module")
def big(api, bcluster, bucket):
    """64 objects of 1 MiB owned by target 1, and one small object of target 0 to lead a batch."""
    names = owned(api, bcluster, bucket, "big", 1, 64)
    for i, n in enumerate(names):
        api.put(bucket, n, bytes([i]) * MIB)
    lead = owned(api, bcluster, bucket, "lead", 0, 1)[0]
    api.put(bucket, lead, b"lead")
    return lead, names


def test_memory_bound(bcluster, big, bucket):
    """The assembler never holds the batch: 64 MiB from the other target raise its peak RSS by far less than
    the batch (owners x the ring + the output buffers)."""
    lead, names = big
    pid = bcluster.c.targets[0].pid
    body = {"in": [{"bucket": bucket, "objname": n} for n in [lead] + names]}
    post(bcluster, 0, {"in": body["in"][:3]}).raise_for_status()  # threads, rings, curl: warm
    before = vm_hwm(pid)
    total = 0
    with post(bcluster, 0, body, stream=True) as r:
        assert r.status_code == 200
        for piece in r.iter_content(256 * 1024):
            total += len(piece)
    assert total > 64 * MIB
    grown = vm_hwm(pid) - before
    assert grown < 16 * MIB, "the assembler's peak RSS grew by %d MiB for a 64 MiB batch" % (grown >> 20)


def test_owner_killed_mid_batch(bcluster, big, bucket):
    """An owner killed while its part streams: the answer is cut (no last chunk), never a short TAR that
    looks whole; the assembler lives on."""
    lead, names = big
    body = {"in": [{"bucket": bucket, "objname": n} for n in [lead] + names]}
    got = 0
    with pytest.raises((requests.exceptions.ChunkedEncodingError, requests.exceptions.ConnectionError)):
        with post(bcluster, 0, body, stream=True) as r:
            assert r.status_code == 200
            for piece in r.iter_content(64 * 1024):
                got += len(piece)
                if got >= MIB and bcluster.c.targets[1].alive():
                    bcluster.kill_target(1)
    assert got < 64 * MIB
    bcluster.restart_target(1)
    r = post(bcluster, 0, {"in": body["in"][:2]})
    assert r.status_code == 200 and untar(r.content)[1][1] == bytes([0]) * MIB


def test_parts_with_auth(make_cluster):
    """With auth on, the assembler's part requests carry the cluster token: a batch spanning both targets is whole."""
    h = make_cluster(targets=2, mountpaths=1, auth=True)
    api = Api(h.url, token=h.token)
    b = unique("gba")
    api.create_bucket(b)
    names = owned(api, h, b, "a", 0, 2) + owned(api, h, b, "b", 1, 2)
    for n in names:
        api.put(b, n, n.encode() * 100)
    body = {"in": [{"bucket": b, "objname": n} for n in names]}
    r = api.s.post(h.url + "/v1/batch", json=body, allow_redirects=False, timeout=TIMEOUT)
    assert r.status_code == 307, r.text
    r = api.s.post(r.headers["Location"], json=body, timeout=TIMEOUT)  # requests drops the token on a redirect
    assert r.status_code == 200, r.text[:300]
    assert untar(r.content) == [("%s/%s" % (b, n), n.encode() * 100) for n in names]
    assert_json_error(session(token="").post(h.c.targets[1].public_url + "/v1/batch?part=true",
                                             json={"in": [{"bucket": b, "objname": names[2]}]}, timeout=TIMEOUT),
                      401, "authentication")
    # AIStore's form (GET /v1/ml/moss): the token at the proxy and at the target it redirects to; none: 401
    moss = {"in": [{"objname": n} for n in names], "strm": True}
    r = api.s.get(h.url + "/v1/ml/moss/" + b, json=moss, allow_redirects=False, timeout=TIMEOUT)
    assert r.status_code == 307, r.text
    assert_json_error(session(token="").get(r.headers["Location"], json=moss, timeout=TIMEOUT), 401, "authentication")
    r = api.s.get(r.headers["Location"], json=moss, timeout=TIMEOUT)
    assert r.status_code == 200 and untar(r.content) == [("%s/%s" % (b, n), n.encode() * 100) for n in names]
    assert_json_error(session(token="").get(h.url + "/v1/ml/moss/" + b, json=moss, timeout=TIMEOUT), 401,
                      "authentication")


def listener_connections(url, listener, sess=None):
    """A target's ft_http_connections_total{listener} ("tcp" or "unix")."""
    r = (sess or session()).get(url + "/metrics", timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return parse(r.text).get(("ft_http_connections_total", (("listener", listener),)), 0.0)


def spread_batch(api, h, bucket, sizes=(0, 1, 513, 3 * RING + 7, 70000)):
    """Objects of every size on each of h's targets, PUT; the items of a batch interleaving them and the members
    the answer must hold."""
    n = len(h.c.targets)
    names = [owned(api, h, bucket, "s%d_" % i, i, len(sizes)) for i in range(n)]
    items, want = [], []
    for k, size in enumerate(sizes):
        for i in range(n):
            name = names[i][k]
            data = os.urandom(size)
            api.put(bucket, name, data)
            items.append({"bucket": bucket, "objname": name})
            want.append(("%s/%s" % (bucket, name), data))
    return items, want


@pytest.mark.parametrize("sockets", [True, False], ids=["unix", "tcp"])
def test_parts_of_owners_on_this_machine(make_cluster, sockets):
    """Owners on the assembler's machine are pulled over their Unix sockets (no loopback TCP); targets without one
    (--public_unix off) over TCP. The batch, whose items are spread over all three targets, is whole either way."""
    h = make_cluster(targets=3, mountpaths=1, target_args=() if sockets else ("--public_unix", "off"))
    api = Api(h.url, session())
    b = unique("gbu")
    api.create_bucket(b)
    items, want = spread_batch(api, h, b)
    urls = [t.public_url for t in h.c.targets]
    before = [listener_connections(u, "unix") for u in urls]
    for _ in range(2):
        r = post(h, 0, {"in": items})
        assert r.status_code == 200, r.text[:300]
        assert untar(r.content) == want
    grown = [listener_connections(u, "unix") - n for u, n in zip(urls, before)]
    if sockets:
        assert grown[0] == 0 and grown[1] >= 2 and grown[2] >= 2, grown  # a connection per pull
    else:
        assert grown == [0, 0, 0], grown


def test_window_larger_than_the_batch(bcluster, api, bucket):
    """Fewer local items than the read-ahead window (and than the readers): every one once, in order."""
    names = owned(api, bcluster, bucket, "small", 0, 5)
    data = {n: os.urandom(100 + 4000 * i) for i, n in enumerate(names)}
    for n, d in data.items():
        api.put(bucket, n, d)
    for k in (1, 2, 4, 5):
        r = post(bcluster, 0, {"in": [{"bucket": bucket, "objname": n} for n in names[:k]]})
        assert r.status_code == 200, r.text[:300]
        assert untar(r.content) == [("%s/%s" % (bucket, n), data[n]) for n in names[:k]]


def test_many_tiny_members_reuse_the_window(bcluster, api, bucket):
    """Hundreds of members of a few bytes: many more than the window's slots fit in one stream write, so a slot
    still gathered for the write is sent before it is reused; the bytes stay in order."""
    names = owned(api, bcluster, bucket, "tiny", 0, 300)
    data = {n: os.urandom(i % 7) for i, n in enumerate(names)}
    for n, d in data.items():
        api.put(bucket, n, d)
    items = [{"bucket": bucket, "objname": n} for n in names]
    r = post(bcluster, 0, {"in": items})
    assert r.status_code == 200, r.text[:300]
    assert untar(r.content) == [("%s/%s" % (bucket, n), data[n]) for n in names]
    r = post(bcluster, 0, {"in": items, "only_names": True})
    assert untar(r.content) == [("%s/%s" % (bucket, n), b"") for n in names]


def test_items_failing_inside_the_window(bcluster, api, bucket):
    """Missing items and bad ranges among items prepared ahead: with continue_on_error each missing one is a
    __404__/ member in its place; without, one met before the stream started is a clean 404 or 416, one met
    after it (here past ~200 KiB of members) cuts the stream."""
    names = owned(api, bcluster, bucket, "win", 0, 60)
    data = {n: os.urandom(16 * 1024 + i) for i, n in enumerate(names)}
    for n, d in data.items():
        api.put(bucket, n, d)
    gone = owned(api, bcluster, bucket, "wgone", 0, 3)
    items = [{"bucket": bucket, "objname": n} for n in names]
    want = [("%s/%s" % (bucket, n), data[n]) for n in names]
    for at, g in zip((2, 25, 59), gone):
        items.insert(at, {"bucket": bucket, "objname": g})
        want.insert(at, ("__404__/%s/%s" % (bucket, g), b""))
    r = post(bcluster, 0, {"in": items, "continue_on_error": True})
    assert r.status_code == 200, r.text[:300]
    assert untar(r.content) == want
    assert_json_error(post(bcluster, 0, {"in": items[:10]}), 404, "does not exist")
    past = {"bucket": bucket, "objname": names[1], "start": 10 ** 6}
    assert_json_error(post(bcluster, 0, {"in": items[:1] + [past] + items[3:8]}), 416, "past the end")
    late = items[:2] + items[3:25] + [items[25]] + items[26:40]  # the missing one after ~380 KiB
    with pytest.raises((requests.exceptions.ChunkedEncodingError, requests.exceptions.ConnectionError)):
        with post(bcluster, 0, {"in": late}, stream=True) as r:
            assert r.status_code == 200
            for _ in r.iter_content(64 * 1024):
                pass
    r = post(bcluster, 0, {"in": late[:5]})  # the target goes on
    assert untar(r.content) == want[:2] + want[3:6]
