# SPDX-License-Identifier: Apache-2.0
# Concurrency: 16 clients PUT distinct payloads to one name with GETs in between; no torn or mixed object.
import concurrent.futures
import hashlib
import os
import random
import threading

from ftutil import TIMEOUT, Api, md5_hex, session, unique

CLIENTS = 16
ROUNDS = 12


def payload(client, rnd):
    """A payload that names its writer in every 8-byte word, so a mix of two shows at once."""
    size = random.Random(client * 1000 + rnd).choice([1, 4096, 65536, 300_000, 1_200_000])
    word = b"%03d:%03d|" % (client, rnd)
    return (word * (size // len(word) + 1))[:size]


def test_one_name_hammered_by_16_clients(cluster, api):
    b = unique("hammer")
    api.create_bucket(b, cksum="md5")
    name = "hot/object"
    all_payloads = {}
    for c in range(CLIENTS):
        for k in range(ROUNDS):
            p = payload(c, k)
            all_payloads[md5_hex(p)] = p
    first = payload(99, 0)
    all_payloads[md5_hex(first)] = first
    api.put(b, name, first)
    owner = api.owner(b, name)
    errors = []
    stats = {"put": 0, "get": 0, "head": 0}
    lock = threading.Lock()

    def check_body(how, r):
        if r.status_code != 200:
            return "%s: status %d %r" % (how, r.status_code, r.text[:200])
        body = r.content
        digest = md5_hex(body)
        if digest not in all_payloads:
            return "%s: torn or mixed body (%d bytes, starts %r)" % (how, len(body), body[:24])
        if r.headers.get("Ais-Checksum-Value") != digest:
            return "%s: header checksum %s != body md5 %s" % (
                how, r.headers.get("Ais-Checksum-Value"), digest)
        if int(r.headers["Content-Length"]) != len(body):
            return "%s: Content-Length %s != %d" % (how, r.headers["Content-Length"], len(body))
        return None

    def client(c):
        a = Api(cluster.url, session())
        for k in range(ROUNDS):
            p = payload(c, k)
            # odd rounds ask the proxy first (a client's path), even ones reuse the known owner
            url = a.owner(b, name) if k % 2 else owner
            r = a.s.put(url, data=p, timeout=TIMEOUT)
            if r.status_code != 200 or r.headers.get("Ais-Checksum-Value") != md5_hex(p):
                return "PUT %d/%d: %d %s" % (c, k, r.status_code, r.headers)
            for how, r in (("GET via proxy", a.get(b, name)),
                           ("GET on owner", a.s.get(owner, timeout=TIMEOUT))):
                err = check_body(how, r)
                if err:
                    return err
            h = a.s.head(owner, timeout=TIMEOUT)
            if h.headers.get("Ais-Checksum-Value") not in all_payloads:
                return "HEAD: checksum %s of no PUT" % h.headers.get("Ais-Checksum-Value")
            if int(h.headers["Ais-Size"]) != len(all_payloads[h.headers["Ais-Checksum-Value"]]):
                return "HEAD: size %s does not match checksum" % h.headers["Ais-Size"]
            with lock:
                stats["put"] += 1
                stats["get"] += 2
                stats["head"] += 1
        return None

    with concurrent.futures.ThreadPoolExecutor(CLIENTS) as ex:
        errors = [e for e in ex.map(client, range(CLIENTS)) if e]
    assert not errors, errors[:5]
    assert stats["put"] == CLIENTS * ROUNDS

    r = api.get(b, name)
    assert md5_hex(r.content) in all_payloads
    entries, _ = api.list_all(b)
    assert [e["name"] for e in entries] == [name]
    assert entries[0]["checksum"] == md5_hex(r.content)
    assert entries[0]["size"] == len(r.content)
    if cluster.local:
        assert cluster.work_files() == []
    api.destroy_bucket(b)


def test_parallel_distinct_names(cluster, api):
    """Many clients, many names, mixed sizes: every object reads back whole."""
    b = unique("par")
    api.create_bucket(b)
    blobs = {"p/%03d" % i: os.urandom(random.choice([0, 1, 1000, 70_000, 500_000]))
             for i in range(200)}

    def put(item):
        n, d = item
        a = Api(cluster.url, session())
        a.put(b, n, d)
        return n

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        list(ex.map(put, blobs.items()))

    def get(n):
        a = Api(cluster.url, session())
        r = a.get(b, n)
        return n, r.status_code, hashlib.sha256(r.content).digest()

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        for n, status, digest in ex.map(get, blobs):
            assert status == 200 and digest == hashlib.sha256(blobs[n]).digest(), n
    entries, _ = api.list_all(b)
    assert {e["name"]: e["size"] for e in entries} == {n: len(d) for n, d in blobs.items()}
    api.destroy_bucket(b)
