# SPDX-License-Identifier: Apache-2.0
# fasttier.datasets without a cluster: sample keys, grouping a TAR's members into samples, dealing shards to workers.
import io
import tarfile
from unittest import mock

import pytest

import fasttier
from fasttier import datasets


def tar_of(members):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name, data in members:
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))
    buf.seek(0)
    return buf


@pytest.mark.parametrize("name,key,ext", [
    ("0001.jpg", "0001", "jpg"),
    ("a/b/0001.seg.png", "a/b/0001", "seg.png"),
    ("a.b/0001.cls", "a.b/0001", "cls"),
    ("noext", "noext", ""),
])
def test_sample_key(name, key, ext):
    assert datasets.sample_key(name) == (key, ext)
    assert fasttier.sample_key(name) == (key, ext)


def test_samples_of_tar_groups_consecutive_members():
    src = tar_of([("d/1.jpg", b"J1"), ("d/1.cls", b"1"), ("d/2.jpg", b"J2"), ("d/2.cls", b"2"), ("d/3.txt", b"t")])
    got = list(datasets.samples_of_tar(src, "s.tar"))
    assert got == [{"__key__": "d/1", "__shard__": "s.tar", "jpg": b"J1", "cls": b"1"},
                   {"__key__": "d/2", "__shard__": "s.tar", "jpg": b"J2", "cls": b"2"},
                   {"__key__": "d/3", "__shard__": "s.tar", "txt": b"t"}]


def worker(i, n):
    return mock.patch("torch.utils.data.get_worker_info", return_value=mock.Mock(id=i, num_workers=n))


def test_shards_dealt_over_rank_and_worker_once_each():
    shards = ["s%02d.tar" % i for i in range(11)]
    got = []
    for rank in range(2):
        ds = fasttier.ShardDataset("http://127.0.0.1:1", "b", shards=shards, rank=rank, world_size=2, shuffle=True)
        ds.set_epoch(3)
        for w in range(3):
            with worker(w, 3):
                got.extend(ds.my_shards())
    assert sorted(got) == shards
    ds = fasttier.ShardDataset("http://127.0.0.1:1", "b", shards=shards, rank=0, world_size=1, shuffle=True)
    with worker(0, 1):
        first = ds.my_shards()
        ds.set_epoch(1)
        assert ds.my_shards() != first and sorted(ds.my_shards()) == shards


def test_arguments_checked():
    with pytest.raises(ValueError):
        fasttier.ShardDataset("http://127.0.0.1:1", "b")
    with pytest.raises(ValueError):
        fasttier.ShardDataset("http://127.0.0.1:1", "b", shards=[], prefix="x")
    with pytest.raises(TypeError):
        fasttier.ShardDataset("http://127.0.0.1:1", "b", shards="one.tar")
    with pytest.raises(ValueError):
        fasttier.ShardDataset("http://127.0.0.1:1", "b", shards=[])
    with pytest.raises(TypeError):
        fasttier.BatchDataset(None, "b", ["x"])


def test_plain_tar_walk_long_names_and_damage():
    long = "d/" + "x" * 150 + "/0001.jpg"
    for fmt in (tarfile.PAX_FORMAT, tarfile.GNU_FORMAT):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
            for name, data in ((long, b"J" * 700), ("d/0002.cls", b"2")):
                ti = tarfile.TarInfo(name)
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
        got = list(datasets.samples_of_tar(io.BytesIO(buf.getvalue()), compressed=False))
        assert [(s["__key__"], sorted(s)) for s in got] == [(long[:-4], ["__key__", "__shard__", "jpg"]),
                                                            ("d/0002", ["__key__", "__shard__", "cls"])]
        assert got[0]["jpg"] == b"J" * 700
    data = bytearray(tar_of([("a.jpg", b"x" * 600)]).getvalue())
    data[10] ^= 0x20  # the header's checksum no longer holds
    with pytest.raises(tarfile.ReadError):
        list(datasets.samples_of_tar(io.BytesIO(bytes(data))))
    with pytest.raises(EOFError):  # cut inside a member
        list(datasets.samples_of_tar(io.BytesIO(tar_of([("a.jpg", b"x" * 600)]).getvalue()[:900])))
