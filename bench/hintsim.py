#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# Cache simulator for epoch order hints: replays a seeded random order over epochs through LRU, the targets' hinted policy and Belady's MIN.
"""
USAGE
  bench/hintsim.py --objects 960 --epochs 3 --cache 576 --seed 42

Prints the hits of each epoch and the hit rate of epochs 2.. (the first epoch of an empty cache has
no hit under any policy when every object is read once per epoch) for three policies over the same
trace, a cache of C objects of one size:
  - LRU: evicts the least recently read object (the targets without a hint).
  - hint: what the targets do under an order hint of the current epoch only (docs/epoch-hints.md,
    "Eviction by next use"): objects the epoch's order no longer expects (read already this epoch,
    or not listed) go first, least recently read first; then the expected one whose next read in
    the epoch is furthest away. The object just read is a candidate too (it is cached, then the
    sweep picks).
  - MIN: Belady's optimal policy with the whole future known (every epoch's order): evicts, among
    the cached objects and the one just read, the one whose next read is furthest away (never read
    again counts as furthest). No policy has more hits.
epoch_orders() is the order the bench row reads (bench/run.py "epoch hints vs LRU"), so its
measured hit rates can be held against these.

Pure Python, deterministic for a seed; about a second per 100,000 reads per policy here.
"""
import argparse
import collections
import heapq
import random
import sys

NEVER = float("inf")


def epoch_orders(objects, epochs, seed):
    """epochs permutations of range(objects), one per epoch, from random.Random(seed)."""
    rng = random.Random(seed)
    out = []
    for _ in range(epochs):
        order = list(range(objects))
        rng.shuffle(order)
        out.append(order)
    return out


def lru(orders, capacity):
    """Hits per epoch of an LRU cache of capacity objects."""
    cache = collections.OrderedDict()
    hits = []
    for order in orders:
        h = 0
        for x in order:
            if x in cache:
                h += 1
                cache.move_to_end(x)
                continue
            cache[x] = None
            if len(cache) > capacity:
                cache.popitem(last=False)
        hits.append(h)
    return hits


def _next_uses(seq):
    """For each position of seq, the position of the same item's next occurrence (NEVER if none)."""
    nxt = [NEVER] * len(seq)
    last = {}
    for i in range(len(seq) - 1, -1, -1):
        nxt[i] = last.get(seq[i], NEVER)
        last[seq[i]] = i
    return nxt


class _Furthest:
    """Items with a next use; pops the one whose next use is furthest (a max-heap with lazy deletes)."""

    def __init__(self):
        self.heap, self.at = [], {}

    def set(self, x, when):
        self.at[x] = when
        heapq.heappush(self.heap, (-when, x))

    def discard(self, x):
        self.at.pop(x, None)

    def __contains__(self, x):
        return x in self.at

    def __len__(self):
        return len(self.at)

    def peek(self):
        while self.heap:
            neg, x = self.heap[0]
            if self.at.get(x) == -neg:
                return x, -neg
            heapq.heappop(self.heap)
        return None, None

    def pop(self):
        x, _ = self.peek()
        del self.at[x]
        return x


def belady(orders, capacity):
    """Hits per epoch of Belady's MIN with the whole trace known (bypass allowed: the object just read
    is not kept when its next use is the furthest)."""
    seq = [x for order in orders for x in order]
    nxt = _next_uses(seq)
    cache = _Furthest()
    hits = []
    pos = 0
    for order in orders:
        h = 0
        for _ in order:
            x, when = seq[pos], nxt[pos]
            pos += 1
            if x in cache:
                h += 1
                cache.set(x, when)
                continue
            if len(cache) < capacity:
                cache.set(x, when)
                continue
            y, ywhen = cache.peek()
            if ywhen > when:
                cache.pop()
                cache.set(x, when)
        hits.append(h)
    return hits


def hinted(orders, capacity):
    """Hits per epoch of the targets' policy under a hint of the current epoch's order only."""
    unexpected = collections.OrderedDict()   # cached, no next use this epoch: least recently read first
    expected = _Furthest()                   # cached, with a next use this epoch
    hits = []
    for order in orders:
        nxt = _next_uses(order)
        first = {}
        for i in range(len(order) - 1, -1, -1):
            first[order[i]] = i
        # The new epoch's hint: a cached object it lists is expected again, at its first place.
        for x in list(unexpected):
            if x in first:
                del unexpected[x]
                expected.set(x, first[x])
        h = 0
        for i, x in enumerate(order):
            if x in unexpected or x in expected:
                h += 1
                expected.discard(x)
                unexpected.pop(x, None)
            if nxt[i] == NEVER:
                unexpected[x] = None
            else:
                expected.set(x, nxt[i])
            if len(unexpected) + len(expected) > capacity:
                if unexpected:
                    unexpected.popitem(last=False)
                else:
                    expected.pop()
        hits.append(h)
    return hits


POLICIES = [("LRU", lru), ("hint", hinted), ("MIN", belady)]


def simulate(objects, epochs, capacity, seed):
    """{policy: {"hits": [per epoch], "rate_after_first": hit rate of epochs 2..}} for the seeded order."""
    orders = epoch_orders(objects, epochs, seed)
    out = {}
    for name, fn in POLICIES:
        hits = fn(orders, capacity)
        later = sum(len(o) for o in orders[1:])
        out[name] = {"hits": hits, "rate_after_first": sum(hits[1:]) / later if later else None}
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description="Hit rates of LRU, the hinted policy and Belady's MIN over a "
                                "seeded random order per epoch.")
    p.add_argument("--objects", type=int, required=True, help="objects in the dataset")
    p.add_argument("--epochs", type=int, default=3, help="epochs (each a new permutation; default 3)")
    p.add_argument("--cache", type=int, required=True, help="objects the cache holds")
    p.add_argument("--seed", type=int, default=42, help="seed of the orders (default 42)")
    a = p.parse_args(argv)
    if a.objects < 1 or a.epochs < 1 or a.cache < 1:
        p.error("--objects, --epochs and --cache must be >= 1")
    res = simulate(a.objects, a.epochs, a.cache, a.seed)
    print("%d objects, cache %d (%.2f of the dataset), %d epochs, seed %d"
          % (a.objects, a.cache, a.cache / a.objects, a.epochs, a.seed))
    for name, _ in POLICIES:
        r = res[name]
        rate = r["rate_after_first"]
        print("%-5s hits per epoch %s; hit rate epochs 2-%d: %s" % (
            name, r["hits"], a.epochs, "%.3f" % rate if rate is not None else "-"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
