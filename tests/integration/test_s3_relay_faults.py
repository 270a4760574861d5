# SPDX-License-Identifier: Apache-2.0
# The S3 GET relay's faults: a target killed or stopped mid-body, clients leaving, the proxy stopped while it moves bodies.
"""
What a client of the S3 relay sees when the owning target dies or stalls in the middle of a body
(a cut response, never a whole-looking one), when many clients leave mid-body, and when the proxy
stops while its loop threads move bodies (test_s3_relay.py has the relay's whole answers).
"""
import http.client
import os
import signal
import threading
import time
import urllib.parse

import s3util
from ftutil import Api
from test_s3_relay import MIB, open_get, presigned_get, raw_get

def test_target_killed_mid_body_cuts_the_response(make_cluster):
    h = make_cluster(targets=2)
    s3 = s3util.client(h, read_timeout=120)
    b = s3util.bucket_name("relay")
    s3.create_bucket(Bucket=b)
    data = os.urandom(32 * MIB)  # more than all the buffers on the way hold (pipe 1 MiB, sockets a few)
    s3.put_object(Bucket=b, Key="big", Body=data)
    victim = h.index_of_url(Api(h.url).owner(b, "big"))

    c, r = open_get(presigned_get(s3, b, "big"))
    try:
        assert r.status == 200
        assert int(r.getheader("Content-Length")) == len(data)
        head = r.read(MIB)
        assert head == data[:MIB]
        h.kill_target(victim)
        got = len(head)
        while True:  # read(amt) ends with b"" at the connection's end, short or not
            chunk = r.read(MIB)
            if not chunk:
                break
            assert chunk == data[got:got + len(chunk)]
            got += len(chunk)
        assert got < len(data), "a whole body after its source died"
    finally:
        c.close()
    h.restart_target(victim)

def test_small_gets_whole_or_failed_while_a_target_dies(make_cluster):
    """Many small GETs in flight while one target is killed: every 200 carries the object's exact
    bytes (never a short or foreign body), and the other target's objects keep being served."""
    h = make_cluster(targets=2)
    s3 = s3util.client(h)
    b = s3util.bucket_name("relay")
    s3.create_bucket(Bucket=b)
    api = Api(h.url)
    objs, owner = {}, {}
    for i in range(40):
        k = "s%02d" % i
        objs[k] = os.urandom(16 * 1024 + i)
        s3.put_object(Bucket=b, Key=k, Body=objs[k])
        owner[k] = h.index_of_url(api.owner(b, k))
    victim = owner["s00"]
    survivors = [k for k in objs if owner[k] != victim]
    assert survivors, "every object on one target: pick more keys"
    urls = {k: presigned_get(s3, b, k) for k in objs}
    u = urllib.parse.urlsplit(h.url)
    stop = threading.Event()
    bad, counts = [], {"ok": 0, "failed": 0}
    lock = threading.Lock()

    def client(seed):
        conn = None
        keys = list(objs)
        i = seed
        while not stop.is_set():
            k = keys[i % len(keys)]
            i += 7
            if conn is None:
                conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
            try:
                st, hd, body = raw_get(conn, urls[k])
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = None
                with lock:
                    counts["failed"] += 1
                continue
            with lock:
                if st == 200 and body != objs[k]:
                    bad.append((k, len(body)))
                counts["ok" if st == 200 else "failed"] += 1
        if conn is not None:
            conn.close()

    threads = [threading.Thread(target=client, args=(s,)) for s in range(6)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    h.kill_target(victim)
    time.sleep(2.0)
    stop.set()
    for t in threads:
        t.join(60)
    assert not bad, "200 answers with other bytes than the object's: %r" % bad[:5]
    assert counts["ok"] > 0
    # the relay loops were not wedged by the dead target's connections
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    try:
        for k in survivors:
            st, _, body = raw_get(conn, urls[k])
            assert (st, body) == (200, objs[k]), k
    finally:
        conn.close()
    h.restart_target(victim)

def test_clients_leaving_mid_body_free_their_workers(make_cluster):
    """More clients than the proxy has workers (64) start an 8 MiB GET each and leave after its
    first bytes, twice: every worker that spliced one comes free (none stays blocked on a full
    pipe nobody drains any more), so whole GETs of the object still succeed afterwards."""
    h = make_cluster(targets=1)
    s3 = s3util.client(h, read_timeout=30)
    b = s3util.bucket_name("relay")
    s3.create_bucket(Bucket=b)
    data = os.urandom(8 * MIB)
    s3.put_object(Bucket=b, Key="big", Body=data)
    url = presigned_get(s3, b, "big")
    for _ in range(2):
        gone = []
        for _ in range(80):
            c, r = open_get(url)
            assert r.status == 200
            assert r.read(64 * 1024) == data[:64 * 1024]
            gone.append(c)
            if len(gone) >= 60:  # the first ones leave while the last ones start
                gone.pop(0).close()
        for c in gone:
            c.close()
    for _ in range(3):
        assert s3.get_object(Bucket=b, Key="big")["Body"].read() == data

def big_object(h, prefix):
    """A new bucket of cluster h holding "big", 16 MiB: more than the buffers on the way hold (the proxy's pipe
    1 MiB, sockets a few). Returns (s3 client, bucket, the object's bytes)."""
    s3 = s3util.client(h, read_timeout=120)
    b = s3util.bucket_name(prefix)
    s3.create_bucket(Bucket=b)
    data = os.urandom(16 * MIB)
    s3.put_object(Bucket=b, Key="big", Body=data)
    return s3, b, data


STALL_TIMEOUT_MS = 3000  # the proxy's s3_relay_timeout_ms in the stall test (default 30000)


def test_target_stalling_mid_body_cuts_the_response(make_cluster):
    """The owner stops (SIGSTOP) in the middle of a large body: the proxy's loop thread goes on
    serving other GETs meanwhile, and after s3_relay_timeout_ms without a byte the client's response
    is cut (never a whole-looking one); once the target goes on, GETs of the object come whole."""
    h = make_cluster(targets=2, proxy_args=("--s3_relay_timeout_ms", str(STALL_TIMEOUT_MS)))
    s3, b, data = big_object(h, "relaystall")
    api = Api(h.url)
    victim = h.index_of_url(api.owner(b, "big"))
    others = {}
    for i in range(40):
        k = "s%02d" % i
        if h.index_of_url(api.owner(b, k)) != victim:
            others[k] = os.urandom(200 * 1024 + i)
            s3.put_object(Bucket=b, Key=k, Body=others[k])
    assert others, "every key on the victim: pick more keys"
    c, r = open_get(presigned_get(s3, b, "big"))
    try:
        assert r.status == 200
        assert r.read(MIB) == data[:MIB]
        h.c.targets[victim].signal(signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            u = urllib.parse.urlsplit(h.url)
            other = http.client.HTTPConnection(u.hostname, u.port, timeout=20)
            for k, v in others.items():  # the same proxy, maybe the same loop thread, is not held up
                st, _, body = raw_get(other, presigned_get(s3, b, k))
                assert (st, body) == (200, v), k
            other.close()
            got = MIB
            while True:
                chunk = r.read(MIB)
                if not chunk:
                    break
                assert chunk == data[got:got + len(chunk)]
                got += len(chunk)
            waited = time.monotonic() - t0
            assert got < len(data), "a whole body from a stopped target"
            assert waited >= STALL_TIMEOUT_MS / 1000 - 0.5, "cut after %.1f s, before the relay's timeout" % waited
            assert waited < 25, "cut after %.1f s: s3_relay_timeout_ms was not used" % waited
        finally:
            h.c.targets[victim].signal(signal.SIGCONT)
    finally:
        c.close()
    assert s3.get_object(Bucket=b, Key="big")["Body"].read() == data

def test_proxy_stops_while_it_moves_bodies(make_cluster):
    """SIGTERM to a proxy whose loop threads are moving large bodies: to clients that stopped
    reading (waiting on the client), and to clients that read while the target is stopped (SIGSTOP:
    waiting on the target). It exits cleanly (status 0, after its drain), every body cut, never
    left looking whole; restarted, it serves the object whole."""
    h = make_cluster(targets=1)
    s3, b, data = big_object(h, "relaystop")
    url = presigned_get(s3, b, "big")
    held, got = [], {}

    def drain(i, r):
        n = MIB
        try:
            while True:
                chunk = r.read(MIB)
                if not chunk:
                    break
                n += len(chunk)
        except (OSError, http.client.HTTPException):
            pass
        got[i] = n

    try:
        for _ in range(6):
            c, r = open_get(url)
            assert r.status == 200
            assert r.read(MIB) == data[:MIB]
            held.append((c, r))
        target = h.c.targets[0]
        target.signal(signal.SIGSTOP)
        try:
            readers = [threading.Thread(target=drain, args=(i, held[i][1])) for i in (4, 5)]
            for t in readers:
                t.start()
            time.sleep(1.0)  # the readers took what was on the way: the proxy waits for the target
            p = h.c.proxy
            p.signal(signal.SIGTERM)
            assert p.wait_dead(30), "the proxy did not exit"
            assert p.returncode == 0, p.returncode
            for t in readers:
                t.join(30)
        finally:
            target.signal(signal.SIGCONT)
        for i in range(4):
            drain(i, held[i][1])
        assert len(got) == 6 and all(n < len(data) for n in got.values()), got
    finally:
        for c, _ in held:
            c.close()
    h.c.proxy.spawn(h.c.env)
    h.c.wait_ready(30)
    assert s3.get_object(Bucket=b, Key="big")["Body"].read() == data
