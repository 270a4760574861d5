# SPDX-License-Identifier: Apache-2.0
# fasttier.ShardDataset and BatchDataset through torch's DataLoader on a real cluster: 2 epochs, every sample's bytes.
import hashlib
import io
import tarfile
import zipfile

import pytest

import fasttier
from conftest import module_cluster
from ftutil import Api, unique

try:
    import torch
    from torch.utils.data import BatchSampler, DataLoader, RandomSampler
except ImportError:  # a missing dependency fails the suite, it is not skipped
    pytest.fail("python3-torch is not installed: run `make deps` (scripts/deps.sh)", pytrace=False)

N_SHARDS = 10
PER_SHARD = 24
EXTS = ("jpg", "cls", "json")
EPOCHS = 2

pcluster = module_cluster("torchshards", "it starts its own cluster with authentication on", targets=3, mountpaths=1,
                          auth=True)


def sample_bytes(key, ext):
    """Deterministic contents of one member: the test recomputes them to check what it read."""
    seed = hashlib.sha256(("%s.%s" % (key, ext)).encode()).digest()
    n = {"jpg": 3000 + seed[0] * 40, "cls": 1 + seed[1] % 4, "json": 40 + seed[2]}[ext]
    return (seed * (n // len(seed) + 1))[:n]


def make_tar(keys, gz=False):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz" if gz else "w") as t:
        for key in keys:
            for ext in EXTS:
                data = sample_bytes(key, ext)
                info = tarfile.TarInfo("%s.%s" % (key, ext))
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def make_zip(keys):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for key in keys:
            for ext in EXTS:
                z.writestr("%s.%s" % (key, ext), sample_bytes(key, ext))
    return buf.getvalue()


def load_shards(api, bucket):
    """N_SHARDS shards (TAR, a TGZ and a ZIP among them) of PER_SHARD samples; returns (shard names, keys)."""
    shards, keys = [], []
    for s in range(N_SHARDS):
        ks = ["s%02d/%05d" % (s, s * PER_SHARD + i) for i in range(PER_SHARD)]
        if s == 3:
            name, body = "train-%02d.tgz" % s, make_tar(ks, gz=True)
        elif s == 7:
            name, body = "train-%02d.zip" % s, make_zip(ks)
        else:
            name, body = "train-%02d.tar" % s, make_tar(ks)
        api.put(bucket, name, body)
        shards.append(name)
        keys.extend(ks)
    return shards, keys


def check_sample(s):
    assert set(s) == {"__key__", "__shard__", *EXTS} or set(s) == {"__key__", *EXTS}, sorted(s)
    for ext in EXTS:
        assert bytes(s[ext]) == sample_bytes(s["__key__"], ext), (s["__key__"], ext)


@pytest.fixture(scope="module")
def shards(cluster):
    api = Api(cluster.url)
    b = unique("torch")
    api.create_bucket(b)
    api.put(b, "train-notes.txt", b"not a shard")
    names, keys = load_shards(api, b)
    yield b, names, keys
    api.destroy_bucket(b, expect=None)


@pytest.mark.parametrize("workers", [2, 4])
def test_shard_dataset_two_epochs_every_sample_once(cluster, shards, workers):
    bucket, names, keys = shards
    ds = fasttier.ShardDataset(cluster.url, bucket, prefix="train-", shuffle=True, seed=7)
    assert sorted(ds.shards) == sorted(names)  # the .txt is no shard
    loader = DataLoader(ds, batch_size=None, num_workers=workers)
    orders = []
    for epoch in range(EPOCHS):
        ds.set_epoch(epoch)
        seen = []
        for s in loader:
            check_sample(s)
            assert s["__key__"].split("/")[0] == "s" + s["__shard__"][6:8]  # from the shard that holds it
            seen.append(s["__key__"])
        assert sorted(seen) == sorted(keys), "epoch %d: %d samples, %d distinct, want %d" % (
            epoch, len(seen), len(set(seen)), len(keys))
        orders.append(seen)
    assert orders[0] != orders[1]  # another shard order each epoch


def test_shard_dataset_split_by_rank(cluster, shards):
    bucket, names, keys = shards
    got = []
    for rank in range(2):
        ds = fasttier.ShardDataset(fasttier.Client(cluster.url), bucket, shards=names, rank=rank, world_size=2)
        part = [s["__key__"] for s in DataLoader(ds, batch_size=None, num_workers=2)]
        assert 0 < len(part) < len(keys)
        got.extend(part)
    assert sorted(got) == sorted(keys)


def test_batch_dataset_two_epochs_one_request_per_batch(cluster, shards):
    bucket, names, keys = shards
    tar_shards = [n for n in names if n.endswith(".tar")]
    ds = fasttier.BatchDataset.from_shards(cluster.url, bucket, tar_shards)
    want = [k for k in keys if "train-%s.tar" % k[1:3] in tar_shards]
    assert sorted(s["__key__"] for s in ds.samples) == sorted(want)
    sampler = BatchSampler(RandomSampler(ds), batch_size=16, drop_last=False)
    loader = DataLoader(ds, sampler=sampler, batch_size=None, num_workers=2)
    for epoch in range(EPOCHS):
        seen = []
        for batch in loader:
            assert 1 <= len(batch) <= 16
            for s in batch:
                check_sample(s)
                seen.append(s["__key__"])
        assert sorted(seen) == sorted(want), "epoch %d" % epoch


def test_batch_dataset_objects_and_missing(cluster, shards):
    bucket, names, _ = shards
    ds = fasttier.BatchDataset(cluster.url, bucket, [names[0], (names[1], "s01/00024.cls"), "no-such-object"])
    got = ds[[0, 1]]
    assert got[0] == Api(cluster.url).get(bucket, names[0]).content
    assert got[1] == sample_bytes("s01/00024", "cls")
    with pytest.raises(fasttier.FastTierError) as e:
        ds[2]
    assert e.value.status == 404


def test_bad_arguments(cluster, shards):
    bucket, names, _ = shards
    with pytest.raises(ValueError):
        fasttier.ShardDataset(cluster.url, bucket)
    with pytest.raises(ValueError):
        fasttier.ShardDataset(cluster.url, bucket, prefix="nothing-here/")
    with pytest.raises(TypeError):
        fasttier.ShardDataset(42, bucket, shards=names)
    ds = fasttier.ShardDataset(cluster.url, bucket, shards=["train-notes.txt"])
    with pytest.raises(fasttier.FastTierError, match="not a readable shard"):
        list(ds)
    ds = fasttier.ShardDataset(cluster.url, bucket, shards=["missing.tar"])
    with pytest.raises(fasttier.FastTierError) as e:
        list(ds)
    assert e.value.status == 404


def test_with_authentication_on(pcluster, monkeypatch):
    api = Api(pcluster.url, token=pcluster.token)
    b = unique("torchauth")
    api.create_bucket(b)
    names, keys = [], []
    for s in range(4):
        ks = ["s%02d/%05d" % (s, s * PER_SHARD + i) for i in range(PER_SHARD)]
        api.put(b, "train-%02d.tar" % s, make_tar(ks))
        names.append("train-%02d.tar" % s)
        keys.extend(ks)
    monkeypatch.setenv("FT_TOKEN", pcluster.token)
    ds = fasttier.ShardDataset(pcluster.url, b, prefix="train-")  # the token from FT_TOKEN
    for _ in range(EPOCHS):
        seen = []
        for s in DataLoader(ds, batch_size=None, num_workers=2):
            check_sample(s)
            seen.append(s["__key__"])
        assert sorted(seen) == sorted(keys)
    monkeypatch.delenv("FT_TOKEN")
    bds = fasttier.BatchDataset.from_shards(fasttier.Client(pcluster.url, token=pcluster.token), b, names[:2])
    batch = bds[list(range(len(bds)))]
    assert len(batch) == 2 * PER_SHARD
    for s in batch:
        check_sample(s)
    with pytest.raises(fasttier.FastTierError) as e:
        fasttier.ShardDataset(fasttier.Client(pcluster.url, token=""), b, prefix="train-")
    assert e.value.status == 401
