# SPDX-License-Identifier: Apache-2.0
# Stopping every running job of a kind or of every kind: DELETE /v1/jobs?kind=K|all=true, AIStore's stop, ft job stop.
import json

import pytest
import requests

import test_jobs
from ftutil import TIMEOUT, assert_json_error, create_remote, unique, wait_job
from test_cli import ft

N = 3000  # names a job takes on: at 0.2 s a GET on 12 threads, minutes of work; every test stops its jobs


slow_origin = test_jobs.slow_origin  # an ht origin taking 0.2 s a GET


@pytest.fixture
def slow(cluster, slow_origin):
    """Two ht buckets on the slow origin, and the ais buckets the copies go to; every job is stopped at the end."""
    made = {"ht": [unique("slow-a"), unique("slow-b")], "ais": []}
    for b in made["ht"]:
        create_remote(cluster.url, b, "ht", {"endpoint": slow_origin})
    yield made
    for kind in ("copy", "prefetch"):
        requests.delete(f"{cluster.url}/v1/jobs", params={"kind": kind}, timeout=TIMEOUT)
    for b in made["ais"]:
        requests.delete(f"{cluster.url}/v1/buckets/{b}", timeout=TIMEOUT)
    for b in made["ht"]:
        requests.delete(f"{cluster.url}/v1/buckets/{b}?provider=ht", timeout=TIMEOUT)


def start(cluster, bucket, action, value):
    r = requests.post(f"{cluster.url}/v1/buckets/{bucket}?provider=ht", json={"action": action, "value": value},
                      timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return r.json()["job_id"]


def prefetch(cluster, bucket, tag):
    return start(cluster, bucket, "prefetch-listrange", {"template": f"{tag}-{{0..{N - 1}}}"})


def copy(cluster, slow, bucket, tag):
    dst = unique("slow-dst")
    slow["ais"].append(dst)
    return start(cluster, bucket, "copy-listrange", {"to": {"name": dst}, "template": f"{tag}-{{0..{N - 1}}}"})


def state(cluster, jid):
    r = requests.get(f"{cluster.url}/v1/jobs/{jid}", timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return r.json()["state"]


def assert_aborted(cluster, jids):
    for jid in jids:
        st = wait_job(cluster, jid, timeout=30)
        assert st["state"] == "aborted", st
        assert st["objects"] < N, st


def stop_kind(cluster, **params):
    r = requests.delete(f"{cluster.url}/v1/jobs", params=params, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return r.json()


def ais_stop(cluster, value):
    return requests.put(f"{cluster.url}/v1/cluster", json={"action": "stop", "name": "", "value": value},
                        timeout=TIMEOUT)


def test_stop_every_copy_through_aistore_leaves_the_prefetches(cluster, slow):
    a, b = slow["ht"]
    copies = [copy(cluster, slow, a, "c"), copy(cluster, slow, b, "c")]
    fetches = [prefetch(cluster, a, "p"), prefetch(cluster, b, "p")]
    assert all(state(cluster, j) == "running" for j in copies + fetches)
    # AIStore's Job.abort() of a kind (xaction args, as the Python SDK sends them): every copy-bck stops
    r = ais_stop(cluster, {"ID": "", "Kind": "copy-bck", "DaemonID": "", "Bck": None, "Buckets": None})
    assert r.status_code == 200, r.text
    assert sorted(r.json()) == sorted(copies), r.text
    assert_aborted(cluster, copies)
    assert all(state(cluster, j) == "running" for j in fetches)
    # no copy runs any more: an empty list, not an error
    r = ais_stop(cluster, {"kind": "copy-bck"})
    assert r.status_code == 200 and r.json() == [], r.text
    # the native API, one bucket only (the Go client's "bck"): the other bucket's prefetch runs on
    r = ais_stop(cluster, {"kind": "prefetch-listrange", "bck": {"name": a, "provider": "ht"}})
    assert r.status_code == 200 and r.json() == [fetches[0]], r.text
    assert_aborted(cluster, fetches[:1])
    assert state(cluster, fetches[1]) == "running"
    assert stop_kind(cluster, kind="prefetch") == {"kind": "prefetch", "stopped": [fetches[1]]}
    assert_aborted(cluster, fetches[1:])


def test_native_stop_by_kind_and_bucket(cluster, slow):
    a, b = slow["ht"]
    fetches = [prefetch(cluster, a, "p"), prefetch(cluster, a, "q"), prefetch(cluster, b, "p")]
    cp = copy(cluster, slow, b, "c")
    # another bucket's name or provider stops nothing
    assert stop_kind(cluster, kind="prefetch", bucket=unique("none")) == {"kind": "prefetch", "stopped": []}
    assert stop_kind(cluster, kind="prefetch", provider="ais", bucket=a)["stopped"] == []
    got = stop_kind(cluster, kind="prefetch", provider="ht", bucket=a)
    assert sorted(got["stopped"]) == sorted(fetches[:2]), got
    assert_aborted(cluster, fetches[:2])
    assert state(cluster, fetches[2]) == "running" and state(cluster, cp) == "running"
    # every bucket: the prefetch of b; the copy stays
    assert stop_kind(cluster, kind="prefetch") == {"kind": "prefetch", "stopped": [fetches[2]]}
    assert_aborted(cluster, fetches[2:])
    assert state(cluster, cp) == "running"
    # jobs that ended are not stopped again
    assert stop_kind(cluster, kind="prefetch")["stopped"] == []
    assert stop_kind(cluster, kind="copy")["stopped"] == [cp]
    assert_aborted(cluster, [cp])


def test_cli_stop_kind(cluster, slow):
    a, b = slow["ht"]
    fa, fb = prefetch(cluster, a, "p"), prefetch(cluster, b, "p")
    rc, out, err = ft(cluster, "job", "stop", "--kind", "prefetch", f"ht://{a}")
    assert rc == 0 and out == f"stopped {fa}\n", (out, err)
    assert_aborted(cluster, [fa])
    assert state(cluster, fb) == "running"
    rc, out, err = ft(cluster, "job", "stop", "--kind", "prefetch", "--json")
    assert rc == 0 and json.loads(out) == {"kind": "prefetch", "stopped": [fb]}, (out, err)
    assert_aborted(cluster, [fb])
    rc, out, err = ft(cluster, "job", "stop", "--kind", "prefetch")
    assert rc == 0 and out == "no running prefetch job\n", (out, err)
    rc, out, err = ft(cluster, "job", "stop", "--kind", "nonsense")
    assert rc == 1 and "unknown job kind" in err and "prefetch" in err, (out, err)
    rc, out, err = ft(cluster, "job", "stop", "--kind", "prefetch", "a", "b")
    assert rc == 2, (out, err)


@pytest.mark.parametrize("params, text", [
    ({}, "kind"),
    ({"kind": ""}, "kind"),
    ({"kind": "copy-bck"}, "known: prefetch, evict"),  # AIStore's name on the native API
    ({"kind": "nonsense"}, "unknown job kind"),
    ({"kind": "copy", "provider": "nope"}, "provider"),
    ({"kind": "copy", "bucket": "bad/name"}, "bucket name"),
    ({"all": "yes"}, "only the value true"),
    ({"all": "true", "kind": "copy"}, "takes no kind"),
    ({"all": "true", "provider": "nope"}, "provider"),
])
def test_native_stop_kind_bad_input(cluster, params, text):
    r = requests.delete(f"{cluster.url}/v1/jobs", params=params, timeout=TIMEOUT)
    assert_json_error(r, 400, text)


@pytest.mark.parametrize("value, status, text", [
    ({"kind": "nonsense"}, 400, "known: prefetch-listrange"),
    ({"kind": "prefetch"}, 400, "unknown job kind"),  # FastTier's name on AIStore's API
    ({"kind": "copy-bck", "bck": "x"}, 400, "bck"),
    ({"kind": "copy-bck", "bck": {"name": "bad/name"}}, 400, "bucket name"),
    ({"kind": "copy-bck", "bck": {"name": "x", "provider": "nope"}}, 400, "provider"),
])
def test_aistore_stop_kind_bad_input(cluster, value, status, text):
    assert_json_error(ais_stop(cluster, value), status, text)


def test_stop_every_job_of_every_kind(cluster, slow):
    """all=true (ais job stop --all, ft job stop --all): every running job of any kind, of one bucket when named."""
    a, b = slow["ht"]
    of_a = [prefetch(cluster, a, "p"), copy(cluster, slow, a, "c")]
    of_b = [prefetch(cluster, b, "p"), copy(cluster, slow, b, "c")]
    got = stop_kind(cluster, all="true", provider="ht", bucket=a)
    assert got["kind"] is None and sorted(got["stopped"]) == sorted(of_a), got
    assert_aborted(cluster, of_a)
    assert all(state(cluster, j) == "running" for j in of_b)
    assert sorted(stop_kind(cluster, all="true")["stopped"]) == sorted(of_b)
    assert_aborted(cluster, of_b)
    assert stop_kind(cluster, all="true") == {"kind": None, "stopped": []}
    # AIStore's Job.abort() with no id and no kind (ais job stop --all)
    jobs = [prefetch(cluster, a, "q"), copy(cluster, slow, b, "d")]
    r = ais_stop(cluster, {"ID": "", "Kind": "", "DaemonID": "", "Bck": None, "Buckets": None})
    assert r.status_code == 200 and sorted(r.json()) == sorted(jobs), r.text
    assert_aborted(cluster, jobs)
    # the CLI
    jobs = [prefetch(cluster, a, "r"), copy(cluster, slow, a, "e")]
    rc, out, err = ft(cluster, "job", "stop", "--all", f"ht://{a}")
    assert rc == 0 and sorted(out.split("\n")) == sorted(["", *("stopped " + j for j in jobs)]), (out, err)
    assert_aborted(cluster, jobs)
    rc, out, err = ft(cluster, "job", "stop", "--all")
    assert rc == 0 and out == "no running job\n", (out, err)
