# SPDX-License-Identifier: Apache-2.0
# bench/hints.py's rows from a run's figures (no cluster): ratios, hit rates, the simulator's figures, a failed run.
import os
import sys
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import hints  # noqa: E402
import report  # noqa: E402


def figures():
    def epochs(secs, gets):
        return [{"seconds": s, "reads": 100, "origin_gets": g, "hint": None} for s, g in zip(secs, gets)]

    fig = {"objects": 100, "quota": 64 << 20, "high_pct": 90, "low_pct": 85, "epochs": 3, "readers": 8,
           "origin_mib_s": 24.0, "rounds": [{
               "lru": {"epochs": epochs([4, 4, 2], [100, 80, 70])},
               "hints": {"epochs": epochs([4, 2, 1], [100, 40, 40])},
               "nostage": {"epochs": epochs([4, 2, 2], [100, 45, 45])}}] * 2}
    for pct in (85, 90):
        fig["sim_%d" % pct] = {"capacity": 60, "result": hints.hintsim.simulate(100, 3, 60, 42)}
    return fig


def test_rows_from_figures():
    t_row, h_row = hints.rows_from(figures(), "origin shaped to 200mbit")
    # Epoch 2: 100/2 against 100/4, epoch 3: 100/1 against 100/2: both 2x (epoch 1 left out), in both rounds.
    assert t_row.ratios() == [2.0, 2.0, 2.0, 2.0] and t_row.met() == "yes" and t_row.status() is None
    # Hit rates over epochs 2-3 of both rounds: hints 1 - 160/400 = 0.6, LRU 1 - 300/400 = 0.25.
    assert abs(h_row.a_rate - 0.6) < 1e-9 and abs(h_row.b_rate - 0.25) < 1e-9
    assert abs(h_row.ratios()[0] - 2.4) < 1e-9 and h_row.met() == "yes"
    cells = h_row.cells()
    assert cells[2] == "order hints, staging on: 0.600" and cells[4] == "2.400x" and cells[6] == ">= 1.50x"
    assert "MIN 0.600" in h_row.client and "origin shaped" in t_row.client
    assert "LRU: epoch wall times 4.00 2.00 4.00 2.00 s, hit rate 0.250" in t_row.notes
    text = report.table_text([t_row, h_row])
    assert "Epoch hints vs LRU: hit rate" in text and "2.400x" in text


def test_failed_run_gives_rows_that_say_why(monkeypatch):
    def boom(b, rate, rounds):
        raise hints.HintsError("the hints run exited with status 1")

    monkeypatch.setattr(hints, "run_child", boom)
    b = types.SimpleNamespace(rows=[], raw=[])
    hints.bench_hints(b)
    assert [r.status() for r in b.rows] == ["not measured: the hints run exited with status 1"] * 2
    assert all(r.met() == "-" for r in b.rows)
