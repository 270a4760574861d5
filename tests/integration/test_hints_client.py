# SPDX-License-Identifier: Apache-2.0
# The Python client on a real cluster: a torch DataLoader (2 workers) over a RandomSampler wrapped in fasttier.HintedSampler, 2 epochs.
"""
Each epoch HintedSampler posts the sampler's order before the workers read; the targets' cursors
then follow the workers' GETs: after each epoch every target holds that epoch's hint with every name
of its share read, none skipped (the workers' reordering stays inside the cursor's window).
"""
import hashlib

import pytest

import fasttier
from conftest import module_cluster
from ftutil import TIMEOUT, Api, ctl, obj_url, session, unique

try:
    import torch
    from torch.utils.data import DataLoader, Dataset, RandomSampler
except ImportError:  # a missing dependency fails the suite, it is not skipped
    pytest.fail("python3-torch is not installed: run `make deps` (scripts/deps.sh)", pytrace=False)

N_OBJECTS = 300
EPOCHS = 2

ccluster = module_cluster("hintclient", "these tests read the targets' control ports", targets=3, mountpaths=1)


class BucketDataset(Dataset):
    """Objects of an ais bucket by index; objnames is what HintedSampler names the indices by."""

    def __init__(self, url, bucket, objnames):
        self.url, self.bucket, self.objnames = url, bucket, objnames

    def __len__(self):
        return len(self.objnames)

    def __getitem__(self, i):
        name = self.objnames[i]
        r = session().get(obj_url(self.url, self.bucket, name, provider="ais"), timeout=TIMEOUT)
        r.raise_for_status()
        return name, torch.frombuffer(bytearray(r.content), dtype=torch.uint8)


def collate(batch):
    return batch


def data_of(name):
    return hashlib.sha256(name.encode()).digest() * 64


def test_dataloader_with_hinted_sampler(ccluster):
    c = ccluster
    b = unique("hcl")
    c.api.create_bucket(b)
    names = ["train/s-%04d" % i for i in range(N_OBJECTS)]
    api = Api(c.url)
    for n in names:
        api.put(b, n, data_of(n))
    ds = BucketDataset(c.url, b, names)
    client = fasttier.Client(c.url)
    sampler = fasttier.HintedSampler(RandomSampler(ds, generator=torch.Generator().manual_seed(7)), client, b,
                                     epoch=1, ttl_s=600)
    loader = DataLoader(ds, batch_size=8, sampler=sampler, num_workers=2, collate_fn=collate)
    orders = []
    for epoch in (1, 2):
        seen = []
        for batch in loader:
            for name, tensor in batch:
                assert tensor.numpy().tobytes() == data_of(name), name
                seen.append(name)
        assert sorted(seen) == sorted(names), "epoch %d did not read every object once" % epoch
        orders.append(seen)
        assert sampler.last_reply["epoch"] == epoch and sampler.last_reply["names"] == N_OBJECTS
        hints = [h for t in c.targets() for h in ctl("GET", t["control_url"], "/v1/hints")["hints"]
                 if h["bucket"] == b]
        assert len(hints) == 3, hints
        for h in hints:
            assert h["epoch"] == epoch and h["job"] == "default"
            assert h["read"] == h["names"] and h["skipped"] == 0 and h["done"], h
        assert sum(h["names"] for h in hints) == N_OBJECTS
    assert orders[0] != orders[1], "the sampler gave the same order twice"
