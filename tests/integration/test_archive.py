# SPDX-License-Identifier: Apache-2.0
# Archive jobs: objects of every target packed into one shard, or into WebDataset shards of a size; bad input.
import io
import os
import tarfile
import zipfile

import pytest

from ftutil import TIMEOUT, assert_json_error, unique, wait_job


def action(api, bucket, value, expect=200):
    r = api.s.post(f"{api.url}/v1/buckets/{bucket}", json={"action": "archive", "value": value}, timeout=TIMEOUT)
    assert r.status_code == expect, r.text
    return r


def run(api, bucket, value, state="finished", where=None):
    jid = action(api, bucket, value).json()["job_id"]
    st = wait_job(where or api, jid)
    assert st["state"] == state, st
    return st


def fill(api, bucket, n, prefix="ds/", exts=(".jpg", ".cls")):
    """n WebDataset samples (one object per extension), sizes varied; name -> bytes."""
    data = {}
    for i in range(n):
        for j, ext in enumerate(exts):
            name = f"{prefix}{i:04d}{ext}"
            data[name] = os.urandom(700 + 131 * i + 17 * j) if ext != ".cls" else str(i).encode()
            api.put(bucket, name, data[name])
    return data


def untar(body):
    with tarfile.open(fileobj=io.BytesIO(body)) as t:
        return {m.name: t.extractfile(m).read() for m in t.getmembers() if m.isfile()}


@pytest.fixture
def bucket(api):
    b = unique("arch")
    api.create_bucket(b)
    yield b
    api.destroy_bucket(b, expect=None)


def test_archive_objnames_into_one_tar_byte_exact(api, bucket):
    data = fill(api, bucket, 12)
    names = sorted(data)
    st = run(api, bucket, {"objnames": names, "archname": "out/all.tar"})
    assert st["kind"] == "archive" and st["objects"] == len(names) and st["errors"] == 0, st
    assert st["total"] == len(names) and st["bytes"] == sum(len(v) for v in data.values()), st
    r = api.get(bucket, "out/all.tar")
    assert r.status_code == 200
    got = untar(r.content)
    assert got == data
    with tarfile.open(fileobj=io.BytesIO(r.content)) as t:
        assert [m.name for m in t.getmembers()] == names  # the order asked
    for name in names[::5]:  # through the member index
        m = api.get(bucket, "out/all.tar", params={"archpath": name})
        assert m.status_code == 200 and m.content == data[name]


def test_archive_template_other_bucket_zip_with_bucket_names(api, bucket):
    data = fill(api, bucket, 5, exts=(".jpg",))
    dst = unique("archdst")
    api.create_bucket(dst)
    try:
        st = run(api, bucket, {"template": "ds/{0000..0004}.jpg", "to_bucket": dst, "archname": "a.zip",
                               "include_src_bucket_name": True})
        assert st["objects"] == 5, st
        r = api.get(dst, "a.zip")
        with zipfile.ZipFile(io.BytesIO(r.content)) as z:
            assert {n: z.read(n) for n in z.namelist()} == {f"{bucket}/{k}": v for k, v in data.items()}
        m = api.get(dst, "a.zip", params={"archpath": f"{bucket}/ds/0003.jpg"})
        assert m.status_code == 200 and m.content == data["ds/0003.jpg"]
    finally:
        api.destroy_bucket(dst, expect=None)


@pytest.mark.parametrize("fmt,ext", [(".tgz", "tgz"), (".tar.lz4", "tar.lz4")])
def test_archive_prefix_compressed_formats(api, bucket, fmt, ext):
    data = fill(api, bucket, 4, prefix="p/")
    fill(api, bucket, 2, prefix="q/")
    st = run(api, bucket, {"prefix": "p/", "archname": f"p.{ext}", "format": fmt})
    assert st["objects"] == len(data), st
    m = api.get(bucket, f"p.{ext}", params={"archpath": "p/0002.jpg"})
    assert m.status_code == 200 and m.content == data["p/0002.jpg"]
    listed = api.s.get(f"{api.url}/v1/buckets/{bucket}", params={"archive": "true", "prefix": f"p.{ext}/"},
                       timeout=TIMEOUT).json()
    assert sorted(e["name"] for e in listed["entries"]) == sorted(f"p.{ext}/{n}" for n in data)


def test_archive_multi_shard_sizes_and_sample_keys(api, bucket):
    data = fill(api, bucket, 40, prefix="flat/", exts=(".jpg", ".cls", ".json"))
    size = 16 * 1024
    st = run(api, bucket, {"prefix": "flat/", "archname": "wds/train-{000..}.tar", "shard_size": size})
    assert st["objects"] == len(data) and st["errors"] == 0, st
    shards = st["shards"]
    assert len(shards) >= 3 and shards[0] == "wds/train-000.tar", st
    assert shards == [f"wds/train-{i:03d}.tar" for i in range(len(shards))]
    seen, keys = {}, {}
    for s in shards:
        got = untar(api.get(bucket, s).content)
        payload = sum(len(v) for v in got.values())
        sample_keys = {n.rsplit(".", 1)[0] for n in got}
        assert payload <= size or len(sample_keys) == 1, (s, payload)
        for n, v in got.items():
            assert n not in seen
            seen[n] = v
            key = n.split(".")[0]
            assert keys.setdefault(key, s) == s, f"sample {key} split across {keys[key]} and {s}"
        m = sorted(got)[0]
        r = api.get(bucket, s, params={"archpath": m})
        assert r.status_code == 200 and r.content == got[m]
    assert seen == data
    # the shards hold every sample whole: 3 members each
    assert all(sum(1 for n in data if n.startswith(k + ".")) == 3 for k in keys)


def test_archive_multi_shard_default_names(api, bucket):
    fill(api, bucket, 6, prefix="m/")
    st = run(api, bucket, {"prefix": "m/", "archname": "out.tar", "shard_size": 1})
    assert st["shards"] == [f"out-{i:05d}.tar" for i in range(6)], st  # one sample each


def test_archive_missing_source_fails_or_is_skipped(api, bucket):
    data = fill(api, bucket, 3, exts=(".jpg",))
    names = sorted(data) + ["ds/missing.jpg"]
    st = run(api, bucket, {"objnames": names, "archname": "bad.tar"}, state="failed")
    assert st["errors"] == 1 and "missing.jpg" in str(st["error_samples"]), st
    assert "no such object" in str(st["error_samples"])
    assert api.head(bucket, "bad.tar").status_code == 404  # nothing published
    st = run(api, bucket, {"objnames": names, "archname": "ok.tar", "continue_on_error": True})
    assert st["objects"] == 3 and st["errors"] == 1, st
    assert untar(api.get(bucket, "ok.tar").content) == data
    st = run(api, bucket, {"objnames": ["nope/1", "nope/2"], "archname": "none.tar", "continue_on_error": True},
             state="failed")
    assert st["errors"] == 3 and "nothing to archive" in str(st["error_samples"]), st


def test_archive_rerun_replaces_shard(api, bucket):
    api.put(bucket, "x/1", b"one")
    run(api, bucket, {"objnames": ["x/1"], "archname": "r.tar"})
    v1 = api.head(bucket, "r.tar").headers["Ais-Version"]
    api.put(bucket, "x/1", b"uno!")
    run(api, bucket, {"objnames": ["x/1"], "archname": "r.tar"})
    assert api.head(bucket, "r.tar").headers["Ais-Version"] != v1
    assert api.get(bucket, "r.tar", params={"archpath": "x/1"}).content == b"uno!"


@pytest.mark.parametrize("value,status,words", [
    ({"objnames": ["a"]}, 400, "archname"),
    ({"objnames": ["a"], "archname": "x.tar", "bogus": 1}, 400, "unknown field"),
    ({"objnames": ["a"], "archname": "x.bin"}, 400, "no archive extension"),
    ({"objnames": ["a"], "archname": "x.tar", "format": ".rar"}, 400, "unknown format"),
    ({"objnames": ["a"], "archname": "x.zip", "format": ".tar"}, 400, "says"),
    ({"objnames": ["a"], "archname": "x.tar", "shard_size": 0}, 400, "shard_size"),
    ({"objnames": ["a"], "archname": "x.tar", "shard_size": "1k"}, 400, "shard_size"),
    ({"objnames": ["a"], "archname": "x-{ab..}.tar", "shard_size": 10}, 400, "template"),
    ({"objnames": ["a"], "archname": "x.tar", "continue_on_error": "yes"}, 400, "true or false"),
    ({"objnames": [], "archname": "x.tar"}, 400, "empty"),
    ({"objnames": ["k" * 1025], "archname": "x.tar"}, 400, "objnames"),  # over S3's 1,024-byte key limit
    ({"objnames": ["a"], "template": "b{0..1}", "archname": "x.tar"}, 400, "one of"),
    ({"objnames": ["a"], "archname": "x.tar", "to_bucket": "no-such-bucket-zz"}, 404, "does not exist"),
    ({"prefix": "none-here/", "archname": "x.tar"}, 404, "no objects"),
    ("x", 400, "value object"),
])
def test_archive_bad_input(api, bucket, value, status, words):
    assert_json_error(action(api, bucket, value, expect=status), status, words)


def test_archive_unknown_source_bucket(api):
    assert_json_error(action(api, unique("nob"), {"objnames": ["a"], "archname": "x.tar"}, expect=404), 404)


def test_archive_from_the_cli(cluster, api, bucket):
    import subprocess

    ft = os.path.join(os.environ.get("FT_BIN", os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin")),
                      "ft")
    env = {k: v for k, v in os.environ.items() if not k.startswith("FT_")}
    env.update(HOME="/nonexistent", FT_ENDPOINT=cluster.url)

    def cli(*args):
        p = subprocess.run([ft, *args], env=env, capture_output=True, text=True, timeout=120)
        return p.returncode, p.stdout, p.stderr

    data = fill(api, bucket, 8, prefix="c/")
    rc, out, err = cli("job", "start", "archive", bucket, "cli-{00..}.tar", "--prefix", "c/", "--shard-size", "4000",
                       "--wait")
    assert rc == 0 and "finished, 16 objects" in out, (out, err)
    got = {}
    for e in api.list_all(bucket, prefix="cli-")[0]:
        got.update(untar(api.get(bucket, e["name"]).content))
    assert got == data
    rc, _, err = cli("job", "start", "archive", bucket, "x.tar")
    assert rc == 2 and "name the objects" in err
    rc, _, err = cli("job", "start", "archive", bucket, "x.tar", "--prefix", "c/", "--shard-size", "lots")
    assert rc == 2 and "--shard-size" in err
    rc, _, err = cli("job", "start", "archive", bucket, "x.bin", "--prefix", "c/")
    assert rc != 0 and "archive extension" in err


def test_archive_into_mirrored_bucket_is_protected(cluster, api, bucket):
    cluster.require_local("it looks at the mirror copies on disk")
    dst = unique("archmir")
    r = api.s.post(api.url + "/v1/buckets/" + dst, json={"action": "create-bck", "value": {"mirror": {"copies": 2}}},
                   timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    try:
        data = fill(api, bucket, 5)
        st = run(api, bucket, {"objnames": sorted(data), "to_bucket": dst, "archname": "m.tar"})
        assert st["to"] == {"provider": "ais", "bucket": dst} and st["shards"] == ["m.tar"], st
        whole = api.get(dst, "m.tar").content
        assert untar(whole) == data
        copies = []
        for mp in cluster.all_mountpaths():
            for p in (os.path.join(mp, "ais", dst, "m.tar"), os.path.join(mp, ".copies", "ais", dst, "m.tar")):
                if os.path.isfile(p):
                    copies.append(open(p, "rb").read())
        assert len(copies) == 2 and all(c == whole for c in copies)
    finally:
        api.destroy_bucket(dst, expect=None)


def test_archive_with_authentication_on(make_cluster):
    from ftutil import Api

    h = make_cluster(targets=3, mountpaths=1, auth=True)
    api = Api(h.url, token=h.token)
    b = unique("archauth")
    api.create_bucket(b)
    data = fill(api, b, 6)  # spread over the 3 targets: the packer GETs from the others with the cluster token
    st = run(api, b, {"prefix": "ds/", "archname": "a.tar"}, where=h)
    assert st["objects"] == len(data) and st["errors"] == 0, st
    assert untar(api.get(b, "a.tar").content) == data
    anon = Api(h.url, token="")
    r = anon.s.post(f"{h.url}/v1/buckets/{b}", json={"action": "archive", "value": {"prefix": "ds/",
                                                                                     "archname": "b.tar"}},
                    timeout=TIMEOUT)
    assert r.status_code in (401, 403), r.text


def test_archive_abort_publishes_nothing(api, bucket):
    for i in range(300):
        api.put(bucket, "ab/%04d.bin" % i, b"%d" % i)
    jid = action(api, bucket, {"prefix": "ab/", "archname": "aborted.tar"}).json()["job_id"]
    r = api.s.delete(f"{api.url}/v1/jobs/{jid}", timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    st = wait_job(api, jid)
    assert st["state"] in ("aborted", "finished"), st
    if st["state"] == "aborted":  # stopped before the end: no shard, not even a partial one
        assert st["objects"] < 300 and api.head(bucket, "aborted.tar").status_code == 404, st
    else:  # too fast to be stopped on this machine: whole
        assert len(untar(api.get(bucket, "aborted.tar").content)) == 300
