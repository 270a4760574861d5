# SPDX-License-Identifier: Apache-2.0
# dsort (reshard): records kept whole and intact, output sizes, orders (alphanumeric, seeded shuffle, key file), abort, bad input.
import hashlib
import io
import json
import os
import random
import subprocess
import tarfile
import time
import zipfile

import pytest
import requests

from ftutil import TIMEOUT, assert_json_error, unique, wait_job, wait_until

SHARD_SIZE = 20000


def make_tar(members, mode="w"):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tf:
        for name, data in members:
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def make_zip(members):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members:
            zf.writestr(name, data)
    return buf.getvalue()


def read_shard(name, body):
    """[(member, bytes)] of a shard in archive order, whatever its format."""
    if name.endswith(".zip"):
        with zipfile.ZipFile(io.BytesIO(body)) as zf:
            return [(i.filename, zf.read(i)) for i in zf.infolist()]
    if name.endswith(".tar.lz4"):
        body = subprocess.run(["lz4", "-d", "-c"], input=body, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:*") as tf:
        return [(m.name, tf.extractfile(m).read()) for m in tf.getmembers() if m.isfile()]


def fill(api, bucket, n_shards=6, samples=8, ext=".tar", seed=1):
    """Input shards shard-000<ext>...: samples of 1-3 members (.jpg, .cls, .json) with random sizes.
    Returns {member: sha256}."""
    rnd = random.Random(seed)
    digests = {}
    for s in range(n_shards):
        members = []
        for k in range(samples):
            key = f"s{s:02d}-{k:03d}" if s % 2 == 0 else f"dir/s{s:02d}-{k:03d}"
            for e in ["jpg", "cls", "json"][: rnd.randint(1, 3)]:
                data = rnd.randbytes(rnd.randint(50, 4000))
                members.append((f"{key}.{e}", data))
                digests[f"{key}.{e}"] = hashlib.sha256(data).hexdigest()
        name = f"shard-{s:03d}{ext}"
        body = make_zip(members) if ext == ".zip" else make_tar(members, "w:gz" if ext == ".tgz" else "w")
        if ext == ".tar.lz4":
            body = subprocess.run(["lz4", "-c"], input=body, capture_output=True, check=True).stdout
        api.put(bucket, name, body)
    return digests


def key(member):
    base = member.rsplit("/", 1)[-1]
    return member[: len(member) - len(base)] + base.split(".", 1)[0]


def start(api, bucket, value, expect=200):
    r = api.s.post(f"{api.url}/v1/buckets/{bucket}", json={"action": "dsort", "value": value}, timeout=TIMEOUT)
    assert r.status_code == expect, r.text
    return r


def run(api, bucket, value):
    st = wait_job(api, start(api, bucket, value).json()["job_id"])
    assert st["state"] == "finished" and st["errors"] == 0, st
    return st


def outputs(api, bucket):
    """{output name: [(member, bytes)]} of every shard of bucket."""
    entries, _ = api.list_all(bucket)
    out = {}
    for e in sorted(entries, key=lambda e: e["name"]):
        if not e["name"].endswith((".tar", ".tgz", ".zip", ".tar.lz4")):
            continue
        r = api.get(bucket, e["name"])
        assert r.status_code == 200
        out[e["name"]] = read_shard(e["name"], r.content)
    return out


@pytest.fixture
def buckets(api):
    src, dst = unique("dsin"), unique("dsout")
    api.create_bucket(src)
    api.create_bucket(dst)
    yield src, dst
    api.destroy_bucket(src, expect=None)
    api.destroy_bucket(dst, expect=None)


def check_records(out, digests, shard_size):
    """Every record before is there after, intact, once; sizes within shard_size + one record; keys not split."""
    after = {}
    where = {}
    for name, members in out.items():
        for m, data in members:
            assert m not in after, f"{m} twice"
            after[m] = hashlib.sha256(data).hexdigest()
            assert where.setdefault(key(m), name) == name, f"sample {key(m)} split over {where[key(m)]}, {name}"
    assert after == digests
    names = list(out)
    for i, name in enumerate(names):
        members = out[name]
        total = sum(len(d) for _, d in members)
        last_key = key(members[-1][0])
        last = sum(len(d) for m, d in members if key(m) == last_key)
        assert total - last < shard_size, (name, total, last)
        if i < len(names) - 1:
            assert total >= shard_size, (name, total)


def key_order(out):
    seen = []
    for members in out.values():
        for m, _ in members:
            if not seen or seen[-1] != key(m):
                seen.append(key(m))
    return seen


def test_dsort_alphanumeric_keeps_every_record_and_sizes(api, buckets):
    src, dst = buckets
    digests = fill(api, src)
    st = run(api, src, {"template": "shard-{000..005}.tar", "to": {"name": dst},
                        "output_template": "out-{0000..0999}.tar", "shard_size": SHARD_SIZE})
    assert st["kind"] == "dsort" and st["to"] == {"provider": "ais", "bucket": dst}, st
    out = outputs(api, dst)
    assert st["objects"] == len(out) and st["bytes"] == sum(len(d) for ms in out.values() for _, d in ms), st
    assert list(out) == [f"out-{i:04d}.tar" for i in range(len(out))]
    check_records(out, digests, SHARD_SIZE)
    keys = key_order(out)
    assert keys == sorted(set(keys)) and len(keys) == len({key(m) for m in digests})
    # members of a sample stay in their listed order (the input's archive order)
    for members in out.values():
        for m, _ in members:
            assert m in digests


def test_dsort_shuffle_is_reproducible_by_seed(api, buckets):
    src, dst = buckets
    digests = fill(api, src, seed=2)
    value = {"prefix": "shard-", "to": {"name": dst}, "output_template": "a-{000..999}.tar",
             "shard_size": SHARD_SIZE, "order": "shuffle", "seed": 7}
    run(api, src, value)
    first = outputs(api, dst)
    check_records(first, digests, SHARD_SIZE)
    assert key_order(first) != sorted(key_order(first))
    run(api, src, value)
    assert outputs(api, dst) == first
    run(api, src, dict(value, seed=8, output_template="b-{000..999}.tar"))
    other = {k: v for k, v in outputs(api, dst).items() if k.startswith("b-")}
    check_records(other, digests, SHARD_SIZE)
    assert key_order(other) != key_order(first)
    assert sorted(key_order(other)) == sorted(key_order(first))


def test_dsort_order_file_json_and_csv(api, buckets):
    src, dst = buckets
    digests = fill(api, src, n_shards=3, seed=3)
    keys = sorted({key(m) for m in digests})
    random.Random(5).shuffle(keys)
    api.put(src, "order.json", json.dumps(keys).encode())
    run(api, src, {"template": "shard-{000..002}.tar", "to": {"name": dst}, "output_template": "j-{00..99}.tar",
                   "shard_size": SHARD_SIZE, "order_file": "order.json"})
    out = outputs(api, dst)
    check_records(out, digests, SHARD_SIZE)
    assert key_order(out) == keys
    # CSV: key first; keys it does not list come last, alphanumeric
    api.put(src, "order.csv", "".join(f"{k},{i}\n" for i, k in enumerate(reversed(keys[3:]))).encode())
    run(api, src, {"template": "shard-{000..002}.tar", "to": {"name": dst}, "output_template": "c-{00..99}.tar",
                   "shard_size": SHARD_SIZE, "order": "file", "order_file": "order.csv"})
    out = {k: v for k, v in outputs(api, dst).items() if k.startswith("c-")}
    assert key_order(out) == list(reversed(keys[3:])) + sorted(keys[:3])


@pytest.mark.parametrize("ext_in,ext_out", [(".tgz", ".zip"), (".zip", ".tar.lz4"), (".tar", ".tgz"),
                                            (".tar.lz4", ".tar")])
def test_dsort_formats(api, buckets, ext_in, ext_out):
    src, dst = buckets
    digests = fill(api, src, n_shards=3, ext=ext_in, seed=4)
    run(api, src, {"template": "shard-{000..002}" + ext_in, "to": {"name": dst},
                   "output_template": "f-{000..999}" + ext_out, "shard_size": SHARD_SIZE})
    out = outputs(api, dst)
    assert all(n.endswith(ext_out) for n in out)
    check_records(out, digests, SHARD_SIZE)


def test_dsort_into_the_same_bucket(api, buckets):
    src, _ = buckets
    digests = fill(api, src, n_shards=2, seed=6)
    run(api, src, {"prefix": "shard-", "output_template": "re-{000..999}.tar", "shard_size": 5000})
    out = {k: v for k, v in outputs(api, src).items() if k.startswith("re-")}
    check_records(out, digests, 5000)


def test_dsort_abort_leaves_nothing(cluster, api, buckets):
    src, dst = buckets
    fill(api, src, n_shards=12, samples=60, seed=9)
    jid = start(api, src, {"template": "shard-{000..011}.tar", "to": {"name": dst},
                           "output_template": "x-{0000..9999}.tar", "shard_size": 3000}).json()["job_id"]
    r = api.s.delete(f"{api.url}/v1/jobs/{jid}", timeout=TIMEOUT)  # at once: hundreds of outputs are still to build
    assert r.status_code == 200, r.text
    st = wait_job(api, jid)
    assert st["state"] == "aborted", st
    entries, _ = api.list_all(dst)
    assert entries == []
    if cluster.local:
        assert cluster.work_files() == []


def test_dsort_bad_input(api, buckets):
    src, dst = buckets
    fill(api, src, n_shards=2, seed=10)
    api.put(src, "bad-000.tar", b"this is not a tar archive at all" * 40)
    ok = {"template": "shard-{000..001}.tar", "to": {"name": dst}, "output_template": "o-{00..99}.tar",
          "shard_size": 1000}
    nob = unique("nobucket")
    cases = [
        (dict(ok, template="shard-{000..002}.tar"), 404, "shard-002.tar\" does not exist"),
        (dict(ok, template="bad-{000..000}.tar"), 422, "no readable members"),
        (dict(ok, template="shard-{002..000}.tar"), 400, "template"),
        (dict(ok, template="shard-000.tar"), 400, "template"),
        (dict(ok, output_template="o.tar"), 400, "output_template"),
        (dict(ok, output_template="o-{0..9}.txt"), 400, "not a shard name"),
        (dict(ok, output_template="o-{0..1}.tar", shard_size=10), 400, "too few"),
        (dict(ok, shard_size=0), 400, "shard_size"),
        (dict(ok, order="random"), 400, "order"),
        (dict(ok, order="file"), 400, "order_file"),
        (dict(ok, order_file="nope.json"), 404, "order_file"),
        (dict(ok, to={"name": nob}), 404, f'output bucket "ais://{nob}" does not exist'),
        (dict(ok, prefix="x"), 400, "exactly one"),
        (dict(ok, bogus=1), 400, "unknown field"),
        (dict({k: v for k, v in ok.items() if k != "template"}, prefix="none-"), 404, "no input shards"),
    ]
    for value, status, text in cases:
        assert_json_error(start(api, src, value, expect=status), status, text)
    assert api.list_all(dst)[0] == []


def test_dsort_cli(cluster, api, buckets):
    from test_cli import ft
    src, dst = buckets
    digests = fill(api, src, n_shards=2, seed=11)
    rc, out, err = ft(cluster, "job", "start", "dsort", src, dst, "--template", "shard-{000..001}.tar",
                      "--output-template", "cli-{000..999}.tgz", "--shard-size", "8000", "--order", "shuffle",
                      "--seed", "3", "--wait")
    assert rc == 0, err
    assert out.startswith("job j-") and "finished" in out, out
    rc, out, _ = ft(cluster, "job", "show", out.split()[1])
    assert rc == 0 and "KIND:     dsort" in out and f"TO:       ais://{dst}" in out, out
    check_records(outputs(api, dst), digests, 8000)
    rc, _, err = ft(cluster, "job", "start", "dsort", src, dst, "--template", "shard-{000..001}.tar")
    assert rc == 2 and "--output-template" in err
    rc, _, err = ft(cluster, "job", "start", "dsort", src, dst, "--template", "nope-{0..1}.tar",
                    "--output-template", "o-{0..9}.tar", "--shard-size", "10")
    assert rc != 0 and "does not exist" in err, err


def test_dsort_with_auth_on(make_cluster):
    """Targets pull members from the input owners' public ports with the cluster token; the proxy reads the order file."""
    from ftutil import Api
    h = make_cluster(targets=2, mountpaths=1, auth=True)
    api = Api(h.url, token=h.token)
    src = unique("dsauth")
    api.create_bucket(src)
    digests = fill(api, src, n_shards=2, seed=12)
    keys = sorted({key(m) for m in digests}, reverse=True)
    api.put(src, "order.json", json.dumps(keys).encode())
    jid = start(api, src, {"template": "shard-{000..001}.tar", "output_template": "z-{000..999}.tar",
                           "shard_size": SHARD_SIZE, "order_file": "order.json"}).json()["job_id"]
    st = wait_job(h, jid)
    assert st["state"] == "finished" and st["errors"] == 0, st
    out = {k: v for k, v in outputs(api, src).items() if k.startswith("z-")}
    check_records(out, digests, SHARD_SIZE)
    assert key_order(out) == keys


def test_dsort_member_failure_fails_the_part_and_removes_its_outputs(cluster, api, buckets):
    """A plan whose member no longer matches (sent to the targets' control ports as the proxy would): the output
    fails with the reason, and the part that owns it leaves no output."""
    from ftutil import ctl
    src, dst = buckets
    fill(api, src, n_shards=1, seed=13)
    jid = unique("j-dsbad").replace("_", "-")
    msg = {"id": jid, "kind": "dsort", "provider": "ais", "bucket": src, "to_bucket": dst,
           "objnames": ["bad-0.tar", "bad-1.tar"], "inputs": ["shard-000.tar"],
           "outputs": {"bad-0.tar": [[0, "s00-000.jpg", 1]], "bad-1.tar": [[0, "s00-000.nope", 5]]}}
    for t in cluster.targets():
        ctl("POST", t["control_url"], "/v1/jobs", msg)
    st = wait_job(api, jid)
    assert st["errors"] == 2 and st["objects"] == 0, st
    samples = " ".join(st["error_samples"])
    assert "the plan said 1" in samples and "no such input shard or member" in samples, samples
    assert api.list_all(dst)[0] == []
    for t in cluster.targets():
        assert_json_error(requests.post(t["control_url"] + "/v1/jobs", json=dict(msg, id=jid + "x", outputs={}),
                                        timeout=TIMEOUT), 400, "not an output of the plan")


def _plan_on_every_target(cluster, api, src, dst, jid, extra_members=()):
    """A dsort plan of 8 one-record outputs sent to every target's control port as the proxy would, with the job's
    members (the targets and extra_members); waits until every target's part has finished. Returns the outputs."""
    from ftutil import ctl
    shard = read_shard("shard-000.tar", api.get(src, "shard-000.tar").content)
    outs = {"ab-%d.tar" % i: [[0, m, len(d)]] for i, (m, d) in enumerate(shard[:8])}
    ids = [t["id"] for t in cluster.targets()]
    msg = {"id": jid, "kind": "dsort", "provider": "ais", "bucket": src, "to_bucket": dst, "objnames": sorted(outs),
           "inputs": ["shard-000.tar"], "outputs": outs, "members": ids + list(extra_members)}
    for t in cluster.targets():
        ctl("POST", t["control_url"], "/v1/jobs", msg)
    for t in cluster.targets():
        wait_until(lambda: ctl("GET", t["control_url"], "/v1/jobs/" + jid)["state"] == "finished", 30,
                   what="the part of %s to finish" % t["id"])
    assert sorted(e["name"] for e in api.list_all(dst)[0]) == sorted(outs)
    return outs


def test_dsort_abort_removes_the_outputs_of_parts_that_finished(cluster, api, buckets):
    """An abort while the job still runs somewhere (here a member that has not reported: the job reads running for
    job_missing_grace_s) removes the outputs of the parts that already finished too: nothing of the job is left."""
    src, dst = buckets
    fill(api, src, n_shards=1, seed=14)
    jid = unique("j-dswd").replace("_", "-")
    _plan_on_every_target(cluster, api, src, dst, jid, extra_members=["t-not-reported"])
    st = api.s.get(f"{api.url}/v1/jobs/{jid}", timeout=TIMEOUT).json()
    assert st["state"] == "running", st
    r = api.s.delete(f"{api.url}/v1/jobs/{jid}", timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    assert r.json()["state"] == "aborted", r.json()
    assert api.list_all(dst)[0] == []
    st = api.s.get(f"{api.url}/v1/jobs/{jid}", timeout=TIMEOUT).json()
    assert st["state"] == "aborted" and all(p["state"] in ("aborted", "missing") for p in st["targets"]), st


def test_dsort_abort_after_the_end_keeps_the_outputs(cluster, api, buckets):
    """Aborting a dsort that finished everywhere changes nothing: its outputs stay."""
    src, dst = buckets
    fill(api, src, n_shards=1, seed=15)
    jid = unique("j-dsend").replace("_", "-")
    outs = _plan_on_every_target(cluster, api, src, dst, jid)
    r = api.s.delete(f"{api.url}/v1/jobs/{jid}", timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    assert r.json()["state"] == "finished", r.json()
    assert sorted(e["name"] for e in api.list_all(dst)[0]) == sorted(outs)


def _dsort_with_a_target_killed(make_cluster, targets, victim_i, away_s, seed, prefix):
    """A dsort of 24 input shards into ~1,000 outputs on a fresh cluster; target victim_i is SIGKILLed once its
    part has written some outputs, restarted away_s later, and the job must finish with every record once."""
    from ftutil import Api, ctl
    h = make_cluster(targets=targets, mountpaths=1)
    api = Api(h.url)
    src, dst = unique(prefix + "in"), unique(prefix + "out")
    api.create_bucket(src)
    api.create_bucket(dst)
    digests = fill(api, src, n_shards=24, samples=60, seed=seed)
    jid = start(api, src, {"template": "shard-{000..023}.tar", "to": {"name": dst},
                           "output_template": "r-{00000..99999}.tar", "shard_size": 3000}).json()["job_id"]
    victim = h.targets()[victim_i]
    index = h.index_of_url(victim["public_url"])
    seen = {}

    def some_done():
        doc = ctl("GET", victim["control_url"], "/v1/jobs/" + jid)
        seen.update(doc)
        return doc["state"] != "running" or doc["objects"] >= 10
    wait_until(some_done, 60, interval=0.02, what="the victim's part to write some outputs")
    print("\nkilled at %d of %d outputs of the victim" % (seen["objects"], seen["total"]))
    assert seen["state"] == "running" and seen["objects"] < seen["total"], seen
    h.kill_target(index, "KILL")
    time.sleep(away_s)
    h.restart_target(index)
    st = wait_job(api, jid, timeout=240)
    assert st["state"] == "finished" and st["errors"] == 0, st
    assert st["objects"] == st["total"], st
    check_records(outputs(api, dst), digests, 3000)
    assert h.work_files() == []


def test_dsort_resumes_after_a_target_kill(make_cluster):
    """SIGKILL of the target in the middle of its part, then a restart: the part resumes from its journal (outputs
    done are skipped and counted), the job finishes, and every record is there once, intact, sizes kept."""
    _dsort_with_a_target_killed(make_cluster, targets=1, victim_i=0, away_s=0, seed=16, prefix="dsr")


def test_dsort_survives_the_restart_of_a_target_others_read_from(make_cluster):
    """Two targets: SIGKILL of one in the middle of the job, restarted 4 s later (longer than the few quick retries
    of a failing member GET). Its part resumes from its journal, and the other target's outputs that need members
    from it wait for it to answer again instead of failing: the job finishes with every record once, intact."""
    _dsort_with_a_target_killed(make_cluster, targets=2, victim_i=1, away_s=4, seed=17, prefix="dsr2")


def test_dsort_aborted_while_a_target_is_down_leaves_no_output(make_cluster):
    """Two targets: SIGKILL of one in the middle of its part, the job aborted while it is out of the map, then a
    restart. The target does not resume its part, and removes the outputs it published before the kill, as the
    abort removed the other target's: an aborted dsort leaves no output."""
    from ftutil import Api, ctl
    h = make_cluster(targets=2, mountpaths=1, keepalive_ms=300, proxy_args=["--job_missing_grace_s", "3"])
    api = Api(h.url)
    src, dst = unique("dsain"), unique("dsaout")
    api.create_bucket(src)
    api.create_bucket(dst)
    fill(api, src, n_shards=24, samples=60, seed=18)
    jid = start(api, src, {"template": "shard-{000..023}.tar", "to": {"name": dst},
                           "output_template": "r-{00000..99999}.tar", "shard_size": 3000}).json()["job_id"]
    victim = h.targets()[1]
    index = h.index_of_url(victim["public_url"])
    seen = {}

    def some_done():
        seen.update(ctl("GET", victim["control_url"], "/v1/jobs/" + jid))
        return seen["state"] != "running" or seen["objects"] >= 10
    wait_until(some_done, 60, interval=0.02, what="the victim's part to write some outputs")
    assert seen["state"] == "running" and 0 < seen["objects"] < seen["total"], seen
    h.kill_target(index, "KILL")
    wait_until(lambda: victim["id"] not in [t["id"] for t in h.targets()], 30, what="the victim out of the map")
    r = requests.delete("%s/v1/jobs/%s" % (h.url, jid), timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    assert wait_job(api, jid, timeout=60)["state"] == "aborted"
    def victim_outputs():
        return [f for mp in h.mountpaths(index) for _, _, fs in os.walk(os.path.join(mp, "ais", dst)) for f in fs]
    assert victim_outputs(), "no output of the victim's on its disk: the kill came too early to test anything"
    h.restart_target(index)
    wait_until(lambda: len(h.targets()) == 2, 30, what="the victim back in the map")
    wait_until(lambda: victim_outputs() == [], 30, what="the victim's outputs removed")
    assert api.list_all(dst)[0] == []
    st = api.s.get("%s/v1/jobs/%s" % (h.url, jid), timeout=TIMEOUT).json()
    assert st["state"] == "aborted" and all(p["state"] != "running" for p in st["targets"]), st
    assert h.work_files() == []
