# SPDX-License-Identifier: Apache-2.0
# bench/hintsim.py on cases small enough to count by hand: LRU, the hinted policy and Belady's MIN.
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import hintsim  # noqa: E402


def test_cyclic_order_lru_misses_all_min_keeps_two():
    # 0 1 2 | 0 1 2 with room for 2. LRU always evicts the one read next: no hit. MIN keeps 0 and 1
    # (2's next read is the furthest, so it is not kept): 0 and 1 hit in the second epoch.
    orders = [[0, 1, 2], [0, 1, 2]]
    assert hintsim.lru(orders, 2) == [0, 0]
    assert hintsim.belady(orders, 2) == [0, 2]
    assert hintsim.hinted(orders, 2) == [0, 2]


def test_two_epochs_by_hand():
    # Epoch 1: 0 1 2 3, epoch 2: 3 1 0 2, room for 2.
    # LRU: after epoch 1 it holds {2, 3}; 3 hits, then 1, 0, 2 miss (2 was evicted by 0): 1 hit.
    # hint: after epoch 1 {2, 3}, both expected by epoch 2; 3 hits and is no longer expected, so 1's
    #   miss evicts 3, 0's miss evicts 1 (the oldest not expected), 2 is still there: 2 hits.
    # MIN: 2 is not kept (read last), 0 is evicted for 3 (0's next read is after 1's): 3 and 1 hit.
    orders = [[0, 1, 2, 3], [3, 1, 0, 2]]
    assert hintsim.lru(orders, 2) == [0, 1]
    assert hintsim.hinted(orders, 2) == [0, 2]
    assert hintsim.belady(orders, 2) == [0, 2]


def test_min_is_an_upper_bound_and_runs_are_deterministic():
    for seed in range(5):
        rng = random.Random(seed)
        orders = [[rng.randrange(40) for _ in range(60)] for _ in range(3)]  # repeats within an epoch too
        for cap in (1, 5, 20, 40):
            m = sum(hintsim.belady(orders, cap))
            assert m >= sum(hintsim.lru(orders, cap)) and m >= sum(hintsim.hinted(orders, cap)), (seed, cap)
    a = hintsim.simulate(200, 3, 120, 9)
    assert a == hintsim.simulate(200, 3, 120, 9)
    assert hintsim.epoch_orders(5, 2, 1) == hintsim.epoch_orders(5, 2, 1)
    # Each epoch read once: nothing hits in the first, the hinted policy and MIN keep the whole cache after.
    assert a["MIN"]["hits"] == [0, 120, 120] and a["hint"]["hits"] == [0, 120, 120]
    assert a["LRU"]["rate_after_first"] < a["MIN"]["rate_after_first"] == 0.6
