# SPDX-License-Identifier: Apache-2.0
# FastTier's Python client: order hints for the cluster and a torch sampler wrapper that posts each epoch's order.
"""
    import fasttier
    client = fasttier.Client("http://127.0.0.1:51080")
    client.post_order_hint("train", names, epoch=0, provider="ht")
    sampler = fasttier.HintedSampler(RandomSampler(ds), client, "train", provider="ht")

Nothing here imports torch: HintedSampler wraps any iterable sampler with a length.
"""
from .client import Client, FastTierError
from .sampler import HintedSampler

__all__ = ["Client", "FastTierError", "HintedSampler"]
