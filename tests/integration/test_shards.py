# SPDX-License-Identifier: Apache-2.0
# Shards: members of TAR (ustar, GNU, PAX), TGZ, ZIP and TAR.LZ4 objects read, selected, listed and appended; bad archives.
import io
import os
import subprocess
import tarfile
import time
import zipfile

import pytest

import s3util
from conftest import module_cluster
from ftutil import TIMEOUT, Api, assert_json_error, obj_path, session, unique

LONG = "deep/" + "d" * 120 + "/" + "n" * 90 + ".bin"  # > 100 bytes: GNU long name or PAX path


def members(n=5, size=3000):
    """Name -> bytes of a small WebDataset-style shard: samples 0000..n-1, each a .jpg and a .cls."""
    out = {}
    for i in range(n):
        out["s/%04d.jpg" % i] = os.urandom(size + i)
        out["s/%04d.cls" % i] = b"%d" % i
    out[LONG] = b"long name " * 50
    out["empty.txt"] = b""
    return out


def make_tar(files, fmt=tarfile.PAX_FORMAT, mode="w"):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode, format=fmt) as t:
        t.addfile(tarfile.TarInfo("dir/"), None)  # a directory entry: no member
        for name, data in files.items():
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            ti.mtime = 1700000000
            t.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def make_zip(files, compression=zipfile.ZIP_STORED):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=compression) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


def gnu_tar(files, tmp_path):
    """A TAR written by GNU tar (--format=gnu: 'L' long-name headers)."""
    root = tmp_path / "src"
    for name, data in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    out = subprocess.run(["tar", "--format=gnu", "-C", str(root), "-cf", "-"] + sorted(files), check=True,
                         stdout=subprocess.PIPE).stdout
    return out


def lz4(data):
    return subprocess.run(["lz4", "-q", "-c"], input=data, check=True, stdout=subprocess.PIPE).stdout


@pytest.fixture(scope="module")
def api(cluster):
    return Api(cluster.url, session())


@pytest.fixture(scope="module")
def bucket(api):
    b = unique("shards")
    api.create_bucket(b)
    return b


def url(api, bucket, name, **params):
    return api.url + obj_path(bucket, name), params


def get_member(api, bucket, shard, member, headers=None, **extra):
    params = {"archpath": member}
    params.update(extra)
    return api.s.get(api.url + obj_path(bucket, shard), params=params, headers=headers, timeout=TIMEOUT)


def check_all(api, bucket, shard, files):
    for name, data in files.items():
        r = get_member(api, bucket, shard, name)
        assert r.status_code == 200, (shard, name, r.status_code, r.text[:200])
        assert r.content == data, (shard, name)


# ---- formats and reading one member ----

@pytest.mark.parametrize("fmt", ["ustar", "pax", "gnu"])
def test_tar_members(api, bucket, fmt, tmp_path):
    files = members()
    if fmt == "ustar":
        files.pop(LONG)  # ustar cannot hold the long name
        data = make_tar(files, tarfile.USTAR_FORMAT)
    elif fmt == "pax":
        data = make_tar(files)
    else:
        data = gnu_tar(files, tmp_path)
    shard = unique("t-%s" % fmt) + ".tar"
    api.put(bucket, shard, data)
    check_all(api, bucket, shard, files)


@pytest.mark.parametrize("ext", [".tgz", ".tar.gz", ".zip", ".zipdeflate", ".tar.lz4"])
def test_compressed_members(api, bucket, ext):
    files = members()
    if ext in (".tgz", ".tar.gz"):
        data = make_tar(files, mode="w:gz")
    elif ext == ".zip":
        data = make_zip(files)
    elif ext == ".zipdeflate":
        data, ext = make_zip(files, zipfile.ZIP_DEFLATED), ".zip"
    else:
        data = lz4(make_tar(files))
    shard = unique("c") + ext
    api.put(bucket, shard, data)
    check_all(api, bucket, shard, files)


def test_archmime_overrides_name(api, bucket):
    files = members(2)
    name = unique("noext") + ".bin"
    api.put(bucket, name, make_zip(files))
    r = get_member(api, bucket, name, "s/0001.jpg", archmime="application/zip")
    assert r.status_code == 200 and r.content == files["s/0001.jpg"]
    assert_json_error(get_member(api, bucket, name, "s/0001.jpg", archmime="application/x-rar"), 400, "archmime")


def test_member_absent_and_non_archive(api, bucket):
    shard = unique("a") + ".tar"
    api.put(bucket, shard, make_tar(members(1)))
    assert_json_error(get_member(api, bucket, shard, "s/nope.jpg"), 404, "no member")
    plain = unique("plain") + ".txt"
    api.put(bucket, plain, b"not an archive")
    assert_json_error(get_member(api, bucket, plain, "x"), 400, "not an archive")
    assert_json_error(get_member(api, bucket, unique("gone") + ".tar", "x"), 404, "does not exist")
    for bad in ("../etc/passwd", "/etc/passwd", "a//b", "a/./b", ""):
        assert_json_error(get_member(api, bucket, shard, bad), 400, "archpath")


def test_member_range(api, bucket):
    files = members(3, size=100000)
    for ext, data in ((".tar", make_tar(files)), (".tgz", make_tar(files, mode="w:gz"))):
        shard = unique("r") + ext
        api.put(bucket, shard, data)
        body = files["s/0002.jpg"]
        r = get_member(api, bucket, shard, "s/0002.jpg", headers={"Range": "bytes=10-99"})
        assert r.status_code == 206, r.text[:200]
        assert r.content == body[10:100]
        assert r.headers["Content-Range"] == "bytes 10-99/%d" % len(body)
        r = get_member(api, bucket, shard, "s/0002.jpg", headers={"Range": "bytes=-7"})
        assert r.status_code == 206 and r.content == body[-7:]
        r = get_member(api, bucket, shard, "s/0002.jpg", headers={"Range": "bytes=%d-" % (len(body) + 5)})
        assert_json_error(r, 416)
        assert r.headers["Content-Range"] == "bytes */%d" % len(body)


def test_head_member(api, bucket):
    files = members(2)
    for ext, data in ((".tar", make_tar(files)), (".tar.lz4", lz4(make_tar(files)))):
        shard = unique("h") + ext
        api.put(bucket, shard, data)
        r = api.s.head(api.url + obj_path(bucket, shard), params={"archpath": "s/0001.jpg"}, allow_redirects=True,
                       timeout=TIMEOUT)
        assert r.status_code == 200
        assert int(r.headers["Content-Length"]) == len(files["s/0001.jpg"])


def test_direct_on_owner(api, bucket):
    """The owning target answers the same read without the proxy's redirect."""
    files = members(2)
    shard = unique("own") + ".tar"
    api.put(bucket, shard, make_tar(files))
    loc = api.owner(bucket, shard)
    r = api.s.get(loc, params={"archpath": "s/0000.cls"}, timeout=TIMEOUT)
    assert r.status_code == 200 and r.content == b"0"


def test_rewrite_invalidates_index(api, bucket):
    shard = unique("inv") + ".tar"
    api.put(bucket, shard, make_tar({"a.txt": b"one", "b.txt": b"two"}))
    assert get_member(api, bucket, shard, "b.txt").content == b"two"
    api.put(bucket, shard, make_tar({"pad.bin": b"x" * 5000, "b.txt": b"second version"}))
    r = get_member(api, bucket, shard, "b.txt")
    assert r.status_code == 200 and r.content == b"second version"
    assert_json_error(get_member(api, bucket, shard, "a.txt"), 404)


def test_duplicate_name_last_wins(api, bucket):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for data in (b"first", b"second!"):
            ti = tarfile.TarInfo("dup.txt")
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))
    for ext, data in ((".tar", buf.getvalue()), (".tar.lz4", lz4(buf.getvalue()))):
        shard = unique("dup") + ext
        api.put(bucket, shard, data)
        assert get_member(api, bucket, shard, "dup.txt").content == b"second!"


# ---- S3 ----
s3 = s3util.client_fixture()


def test_s3_getobject_archpath(cluster, api, bucket, s3):
    files = members(2)
    shard = unique("s3") + ".tar"
    api.put(bucket, shard, make_tar(files))

    def add_archpath(request, **kw):
        sep = "&" if "?" in request.url else "?"
        request.url += sep + "archpath=s%2F0001.jpg"

    s3.meta.events.register("before-sign.s3.GetObject", add_archpath)
    try:
        got = s3.get_object(Bucket=bucket, Key=shard)["Body"].read()
    finally:
        s3.meta.events.unregister("before-sign.s3.GetObject", add_archpath)
    assert got == files["s/0001.jpg"]


# ---- many members: archregx + archmode as one TAR stream ----

def select(api, bucket, shard, regx, mode=None):
    params = {"archregx": regx}
    if mode:
        params["archmode"] = mode
    return api.s.get(api.url + obj_path(bucket, shard), params=params, timeout=TIMEOUT)


def untar(body):
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:") as t:
        return {m.name: t.extractfile(m).read() for m in t.getmembers()}


@pytest.mark.parametrize("ext", [".tar", ".tgz", ".zip", ".tar.lz4"])
def test_select_modes(api, bucket, ext):
    files = members(4)
    data = {".tar": lambda: make_tar(files), ".tgz": lambda: make_tar(files, mode="w:gz"),
            ".zip": lambda: make_zip(files, zipfile.ZIP_DEFLATED), ".tar.lz4": lambda: lz4(make_tar(files))}[ext]()
    shard = unique("sel") + ext
    api.put(bucket, shard, data)
    cases = [
        (r"^s/000[12]\.jpg$", None, {"s/0001.jpg", "s/0002.jpg"}),
        ("s/0003", "prefix", {"s/0003.jpg", "s/0003.cls"}),
        (".cls", "suffix", {"s/%04d.cls" % i for i in range(4)}),
        ("ddd", "substr", {LONG}),
        ("s/0002", "wdskey", {"s/0002.jpg", "s/0002.cls"}),
    ]
    for regx, mode, want in cases:
        r = select(api, bucket, shard, regx, mode)
        assert r.status_code == 200, (regx, mode, r.text[:200])
        assert r.headers["Content-Type"] == "application/x-tar"
        got = untar(r.content)
        assert set(got) == want, (regx, mode)
        for name in want:
            assert got[name] == files[name]
    assert_json_error(select(api, bucket, shard, "nothing-matches", "prefix"), 404, "no member")
    assert_json_error(select(api, bucket, shard, "x", "glob"), 400, "archmode")
    assert_json_error(select(api, bucket, shard, "(", "regexp"), 400, "archregx")


# ---- listing with archive=true ----

def list_all(api, bucket, pagesize=None, prefix=None, archive=True):
    out, token = [], None
    for _ in range(10000):
        params = {"archive": "true"} if archive else {}
        if pagesize:
            params["pagesize"] = str(pagesize)
        if prefix:
            params["prefix"] = prefix
        if token:
            params["continuation_token"] = token
        r = api.s.get(api.url + "/v1/buckets/" + bucket, params=params, timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        page = r.json()["entries"]
        if pagesize:
            assert len(page) <= pagesize
        out.extend(page)
        token = r.json().get("continuation_token")
        if not token:
            return out
    raise AssertionError("listing does not end")


def test_list_archive(api):
    b = unique("lsarch")
    api.create_bucket(b)
    files = members(3)
    files["../evil"] = b"never listed"  # an unaddressable name stays out of the listing
    want, objects = {}, []
    for name, data in (("a.tar", make_tar(files)), ("a.tar.bak", b"between"), ("a.tar-x", b"x"),
                       ("b.zip", make_zip(files)), ("c.tgz", make_tar(files, mode="w:gz")),
                       ("d.txt", b"plain"), ("z/e.tar.lz4", lz4(make_tar(files)))):
        api.put(b, name, data)
        want[name] = len(data)
        objects.append(name)
        if name.endswith((".tar", ".zip", ".tgz", ".lz4")):
            for m, d in files.items():
                if m != "../evil":
                    want[name + "/" + m] = len(d)
    plain = list_all(api, b, archive=False)
    assert [e["name"] for e in plain] == sorted(objects)
    expect = sorted(want)
    for pagesize in (None, 1, 2, 3, 7, 1000):
        got = list_all(api, b, pagesize)
        assert [e["name"] for e in got] == expect, pagesize
        assert {e["name"]: e["size"] for e in got} == want
        assert all(e.get("in_archive", False) == (e["name"] not in objects) for e in got), got
        assert all(e["name"].startswith(e["shard"] + "/") and e["shard"] in objects for e in got if "shard" in e)
    got = list_all(api, b, 2, prefix="a.tar/s/000")
    assert [e["name"] for e in got] == sorted(n for n in want if n.startswith("a.tar/s/000"))
    got = list_all(api, b, 3, prefix="a.tar")
    assert [e["name"] for e in got] == sorted(n for n in want if n.startswith("a.tar"))


# ---- append: PUT ?archpath= ----

def append(api, bucket, shard, member, data, expect=200, **extra):
    params = {"archpath": member}
    params.update(extra)
    r = api.s.put(api.url + obj_path(bucket, shard), params=params, data=data, allow_redirects=False,
                  timeout=TIMEOUT)
    assert r.status_code == 307, r.text
    r = api.s.put(r.headers["Location"], data=data, allow_redirects=False, timeout=TIMEOUT)
    assert r.status_code == expect, (shard, member, r.status_code, r.text[:300])
    return r


@pytest.mark.parametrize("ext", [".tar", ".tgz", ".zip", ".tar.lz4"])
def test_append_creates_and_grows(api, bucket, ext):
    shard = unique("app") + ext
    files = {}
    for i, name in enumerate(["a/0001.jpg", "a/0001.cls", LONG, "a/0002.jpg", "empty"]):
        files[name] = os.urandom(1000 * i) if name != "empty" else b""
        r = append(api, bucket, shard, name, files[name])
        assert r.headers["Ais-Version"] == str(i + 1)
    check_all(api, bucket, shard, files)
    whole = api.get(bucket, shard)
    assert whole.status_code == 200
    if ext == ".tar":
        assert untar(whole.content) == files  # a valid TAR any tool reads
    elif ext == ".zip":
        with zipfile.ZipFile(io.BytesIO(whole.content)) as z:
            assert {n: z.read(n) for n in z.namelist()} == files
    # the same name again: the new bytes win
    append(api, bucket, shard, "a/0001.cls", b"relabelled")
    assert get_member(api, bucket, shard, "a/0001.cls").content == b"relabelled"
    names = [e["name"] for e in list_all(api, bucket, prefix=shard + "/")]
    assert names == sorted(shard + "/" + n for n in files)


def test_append_existing_tar_and_format(api, bucket, tmp_path):
    files = members(2)
    shard = unique("ext") + ".tar"
    api.put(bucket, shard, gnu_tar(files, tmp_path))
    append(api, bucket, shard, "new/member.txt", b"appended")
    files["new/member.txt"] = b"appended"
    check_all(api, bucket, shard, files)
    out = subprocess.run(["tar", "-tf", "-"], input=api.get(bucket, shard).content, check=True,
                         stdout=subprocess.PIPE).stdout.decode().split()
    assert sorted(out) == sorted(files)


def test_append_bad_input(api, bucket):
    shard = unique("badapp") + ".tar"
    for bad in ("../escape", "/abs/path", "a/../../b", "a//b", "dir/"):
        append(api, bucket, shard, bad, b"x", expect=400)
    assert api.get(bucket, shard).status_code == 404  # nothing stored
    plain = unique("plain") + ".bin"
    append(api, bucket, plain, "m", b"x", expect=400)
    r = api.s.put(api.url + obj_path(bucket, shard), params={"archregx": "x"}, data=b"x", timeout=TIMEOUT)
    assert r.status_code == 400
    # a corrupt TAR is refused, not extended
    data = bytearray(make_tar(members(1)))
    data[512 + 10] ^= 0xFF  # a header byte of the second member: its checksum no longer holds
    api.put(bucket, shard, bytes(data))
    r = append(api, bucket, shard, "m", b"x", expect=422)
    assert api.get(bucket, shard).content == bytes(data)


def test_append_concurrent_and_readers(api, bucket):
    """Concurrent appends to one shard serialize (every member lands); readers always see a whole TAR."""
    import concurrent.futures
    import threading

    shard = unique("conc") + ".tar"
    append(api, bucket, shard, "seed", b"seed")
    n = 24
    stop = threading.Event()
    seen = []

    def reader():
        s = session()
        while not stop.is_set():
            r = s.get(api.url + obj_path(bucket, shard), timeout=TIMEOUT)
            assert r.status_code == 200
            seen.append(len(untar(r.content)))  # raises on a torn TAR

    def writer(i):
        a = Api(api.url, session())
        append(a, bucket, shard, "m/%03d" % i, b"%d" % i * (i + 1))

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        rd = [ex.submit(reader) for _ in range(2)]
        list(ex.map(writer, range(n)))
        stop.set()
        for f in rd:
            f.result()
    got = untar(api.get(bucket, shard).content)
    assert len(got) == n + 1
    for i in range(n):
        assert got["m/%03d" % i] == b"%d" % i * (i + 1)
    assert api.head(bucket, shard).headers["Ais-Version"] == str(n + 1)
    assert seen and all(1 <= k <= n + 1 for k in seen)


def test_append_mirrored(cluster, api):
    cluster.require_local("it looks at the mirror copies on disk")
    b = unique("appmir")
    r = api.s.post(api.url + "/v1/buckets/" + b, json={"action": "create-bck", "value": {"mirror": {"copies": 2}}},
                   timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    shard = "m.tar"
    append(api, b, shard, "one", b"1" * 3000)
    append(api, b, shard, "two", b"2" * 5000)
    whole = api.get(b, shard).content
    copies = []
    for mp in cluster.all_mountpaths():
        for p in (os.path.join(mp, "ais", b, shard), os.path.join(mp, ".copies", "ais", b, shard)):
            if os.path.isfile(p):
                copies.append(open(p, "rb").read())
    assert len(copies) == 2 and all(c == whole for c in copies)


# ---- bad input: corrupt and truncated shards, bombs, unsafe names ----

def corrupt_header(data):
    """A TAR whose second header has a wrong checksum."""
    d = bytearray(data)
    off = 512 + ((tarfile.TarFile.open(fileobj=io.BytesIO(data)).getmembers()[0].size + 511) // 512) * 512
    d[off + 5] ^= 0x41
    return bytes(d)


def test_corrupt_tar_header(api, bucket):
    files = {"a.txt": b"a" * 700, "b.txt": b"b" * 10, "c.txt": b"c"}
    bad = corrupt_header(make_tar(files, tarfile.USTAR_FORMAT))
    for ext, data in ((".tar", bad), (".tgz", gzip_bytes(bad)), (".tar.lz4", lz4(bad))):
        shard = unique("cor") + ext
        api.put(bucket, shard, data)
        for m in files:
            assert_json_error(get_member(api, bucket, shard, m), 422, "corrupt")
        assert_json_error(select(api, bucket, shard, ".txt", "suffix"), 422, "corrupt")


def gzip_bytes(data):
    import gzip
    return gzip.compress(data)


def test_truncated_member(api, bucket):
    """A shard cut inside its last member: never a short member served."""
    files = {"a.txt": b"a" * 700, "big.bin": os.urandom(200000)}
    whole = make_tar(files, tarfile.USTAR_FORMAT)
    cut = whole[: 512 + 1024 + 512 + 100000]  # inside big.bin
    for ext, data in ((".tar", cut), (".tgz", gzip_bytes(whole)[:-5000]), (".tar.lz4", lz4(whole)[:-3000]),
                      (".zip", make_zip(files)[:-30]), (".zip", make_zip(files)[:150000])):
        shard = unique("cut") + ext
        api.put(bucket, shard, data)
        r = get_member(api, bucket, shard, "big.bin")
        assert r.status_code in (422,), (ext, r.status_code, r.text[:200])
        assert_json_error(r, 422)


def test_corrupt_zip_member(api, bucket):
    """A deflated ZIP member whose bytes were damaged: 422, not garbage."""
    files = {"a.txt": b",".join(b"%d" % (i * i) for i in range(20000))}
    data = bytearray(make_zip(files, zipfile.ZIP_DEFLATED))
    data[30 + len("a.txt") + 500] ^= 0xFF  # inside the deflated data
    shard = unique("badzip") + ".zip"
    api.put(bucket, shard, bytes(data))
    assert_json_error(get_member(api, bucket, shard, "a.txt"), 422)


def test_unsafe_names_never_on_disk(cluster, api, bucket):
    cluster.require_local("it looks at the mountpaths")
    files = {"../escape.txt": b"x", "/abs.txt": b"y", "ok/fine.txt": b"z"}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name, data in files.items():
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))
    shard = unique("unsafe") + ".tar"
    api.put(bucket, shard, buf.getvalue())
    assert get_member(api, bucket, shard, "ok/fine.txt").content == b"z"
    assert_json_error(get_member(api, bucket, shard, "../escape.txt"), 400)
    assert_json_error(get_member(api, bucket, shard, "/abs.txt"), 400)
    got = untar(select(api, bucket, shard, ".*").content)
    assert set(got) == {"ok/fine.txt"}
    names = [e["name"] for e in list_all(api, bucket, prefix=shard)]
    assert names == [shard, shard + "/ok/fine.txt"]
    append(api, bucket, shard, "../../../escape2.txt", b"x", expect=400)
    for mp in cluster.all_mountpaths():
        for root, dirs, fnames in os.walk(os.path.dirname(mp.rstrip("/"))):
            assert "escape.txt" not in fnames and "escape2.txt" not in fnames and "abs.txt" not in fnames


# A target whose decoded-size limit is 1 MiB: gzip and zip bombs stop there.
limited = module_cluster("shardlimit", "it starts a target with a small shard_max_decoded_bytes", targets=1,
                         target_args=["--shard_max_decoded_bytes", str(1 << 20)])


def test_decoded_size_limit(limited):
    a = Api(limited.url, session())
    b = unique("bomb")
    a.create_bucket(b)
    zeros = b"\0" * (8 << 20)  # 8 MiB of zeros compress to a few KiB
    tar_bomb = make_tar({"zeros.bin": zeros, "small.txt": b"ok"})
    for ext, data in ((".tgz", gzip_bytes(tar_bomb)), (".tar.lz4", lz4(tar_bomb)),
                      (".zip", make_zip({"zeros.bin": zeros, "small.txt": b"ok"}, zipfile.ZIP_DEFLATED))):
        assert len(data) < (1 << 20)
        shard = unique("bomb") + ext
        a.put(b, shard, data)
        r = get_member(a, b, shard, "zeros.bin")
        assert_json_error(r, 422, "limit")
    # an uncompressed TAR decodes nothing: its size is no bomb
    a.put(b, "plain.tar", tar_bomb)
    r = get_member(a, b, "plain.tar", "zeros.bin")
    assert r.status_code == 200 and len(r.content) == len(zeros)


# ---- GetBatch: POST /v1/batch ----

def batch(api, body):
    return api.s.post(api.url + "/v1/batch", json=body, timeout=TIMEOUT)


def untar_list(body):
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:") as t:
        return [(m.name, t.extractfile(m).read()) for m in t.getmembers()]


def test_get_batch(api, bucket):
    b2 = unique("batch2")
    api.create_bucket(b2)
    objs = {"o/%03d" % i: os.urandom(100 + 37 * i) for i in range(40)}  # spread over every target
    for name, data in objs.items():
        api.put(bucket if int(name[2:]) % 2 else b2, name, data)
    files = members(3)
    shard = unique("bsh") + ".tar"
    api.put(bucket, shard, make_tar(files))
    items, want = [], []
    for name, data in sorted(objs.items(), reverse=True):  # an order no target would pick
        bk = bucket if int(name[2:]) % 2 else b2
        items.append({"bucket": bk, "objname": name})
        want.append(("%s/%s" % (bk, name), data))
    items.append({"bucket": bucket, "objname": shard, "archpath": "s/0002.jpg"})
    want.append(("%s/%s/s/0002.jpg" % (bucket, shard), files["s/0002.jpg"]))
    items.append({"bucket": bucket, "objname": shard, "archpath": "s/0001.jpg", "start": 10, "length": 50})
    want.append(("%s/%s/s/0001.jpg" % (bucket, shard), files["s/0001.jpg"][10:60]))
    items.append({"bucket": b2, "objname": "o/000", "start": 5})
    want.append(("%s/o/000" % b2, objs["o/000"][5:]))
    r = batch(api, {"in": items, "format": ".tar"})
    assert r.status_code == 200, r.text[:300]
    assert r.headers["Content-Type"] == "application/x-tar"
    assert untar_list(r.content) == want

    # a missing item: the request fails, or with continue_on_error an empty __404__/ member in its place
    missing = [items[0], {"bucket": bucket, "objname": "nope"}, {"bucket": bucket, "objname": shard,
                                                                 "archpath": "s/none"}, items[1]]
    assert_json_error(batch(api, {"in": missing}), 404, "does not exist")
    r = batch(api, {"in": missing, "continue_on_error": True})
    assert r.status_code == 200
    got = untar_list(r.content)
    assert [n for n, _ in got] == [want[0][0], "__404__/%s/nope" % bucket,
                                   "__404__/%s/%s/s/none" % (bucket, shard), want[1][0]]
    assert got[1][1] == b"" and got[0][1] == want[0][1]
    r = batch(api, {"in": items[:3], "only_names": True})
    assert [(n, d) for n, d in untar_list(r.content)] == [(n, b"") for n, _ in want[:3]]


def test_get_batch_bad_input(api, bucket):
    assert_json_error(batch(api, {"nope": []}), 400)
    assert_json_error(api.s.post(api.url + "/v1/batch", data=b"{not json", timeout=TIMEOUT), 400)
    r = api.s.post(api.url + "/v1/batch", json={"in": [{"bucket": bucket, "objname": "x", "archpath": "../x"}]},
                   timeout=TIMEOUT)
    assert_json_error(r, 400)
    r = batch(api, {"in": [{"bucket": bucket, "objname": "x"}], "format": ".zip"})
    assert_json_error(r, 400, "format")
    assert api.s.get(api.url + "/v1/batch", timeout=TIMEOUT).status_code == 405


def test_append_erasure_coded(cluster, api):
    """An appended shard of an EC bucket is sliced again: a holder keeps the newest version's slice or replica."""
    cluster.require_local("it looks at the EC slices on disk")
    b = unique("appec")
    r = api.s.post(api.url + "/v1/buckets/" + b, timeout=TIMEOUT, json={
        "action": "create-bck", "value": {"ec": {"data_slices": 1, "parity_slices": 1, "objsize_limit": 0}}})
    assert r.status_code == 200, r.text
    time.sleep(0.5)  # the BMD reaches every target
    append(api, b, "ec.tar", "one", b"1" * 3000)
    r = append(api, b, "ec.tar", "two", b"2" * 5000)
    whole = api.get(b, "ec.tar").content
    assert untar(whole) == {"one": b"1" * 3000, "two": b"2" * 5000}
    held = []
    for mp in cluster.all_mountpaths():
        p = os.path.join(mp, ".ec", "ais", b, "ec.tar")
        if os.path.isfile(p):
            raw = open(p, "rb").read()
            assert raw[:4] == b"FTEC", p
            n = int.from_bytes(raw[4:8], "little")
            held.append(raw[8 + n + 4:])  # header, its checksum, then the replica (protect/ec_codec.h)
    # 1+1 keeps a full replica on another target: the newest version, the shard with both members
    assert held and all(h == whole for h in held), "EC holders do not keep the appended shard"
