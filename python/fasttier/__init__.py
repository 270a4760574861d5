# SPDX-License-Identifier: Apache-2.0
# FastTier's Python client: order hints, a torch sampler wrapper, and torch datasets over shards and GetBatch.
"""
    import fasttier
    client = fasttier.Client("http://127.0.0.1:51080")
    client.post_order_hint("train", names, epoch=0, provider="ht")
    sampler = fasttier.HintedSampler(RandomSampler(ds), client, "train", provider="ht")

    ds = fasttier.ShardDataset(client, "wds", prefix="train-")      # whole shards per DataLoader worker
    loader = DataLoader(ds, num_workers=4, batch_size=None)
    bds = fasttier.BatchDataset.from_shards(client, "wds", shards)  # samples by index, one GetBatch a batch

Client and HintedSampler do not import torch; ShardDataset and BatchDataset (fasttier.datasets) do,
on first use.
"""
from .client import Client, FastTierError
from .sampler import HintedSampler

__all__ = ["Client", "FastTierError", "HintedSampler", "ShardDataset", "BatchDataset"]


def __getattr__(name):
    if name in ("ShardDataset", "BatchDataset", "sample_key"):
        from . import datasets
        return getattr(datasets, name)
    raise AttributeError("module 'fasttier' has no attribute %r" % name)
