# SPDX-License-Identifier: Apache-2.0
# The Python client without a cluster: HintedSampler's posted hints (order, names, epochs) and errors, against a recording HTTP server.
import random
import socket
import urllib.parse
import warnings

import pytest

import fasttier
from recorder import recorder  # noqa: F401 (the fixture)


class FakeSampler:
    """A seeded random permutation of range(n), a new one per iteration (as RandomSampler)."""

    def __init__(self, n, seed=1):
        self.n = n
        self.rng = random.Random(seed)
        self.epochs_set = []

    def __len__(self):
        return self.n

    def __iter__(self):
        order = list(range(self.n))
        self.rng.shuffle(order)
        return iter(order)

    def set_epoch(self, epoch):
        self.epochs_set.append(epoch)


class Dataset:
    def __init__(self, n):
        self.objnames = ["s-%04d" % i for i in range(n)]

    def __len__(self):
        return len(self.objnames)


def test_each_epoch_posts_its_order_then_yields_it(recorder):
    client = fasttier.Client(recorder.url)
    ds = Dataset(50)
    s = fasttier.HintedSampler(FakeSampler(50), client, "train", dataset=ds, provider="ht", ttl_s=600)
    assert len(s) == 50
    seen = []
    for _ in range(3):
        it = iter(s)
        assert len(recorder.hints()) == len(seen) + 1, "the hint is posted when the epoch's iteration starts"
        seen.append(list(it))
    hints = recorder.hints()
    assert [h["epoch"] for h in hints] == [0, 1, 2]
    for order, h in zip(seen, hints):
        assert sorted(order) == list(range(50))
        assert h["objnames"] == [ds.objnames[i] for i in order], "the names posted are the order yielded"
        assert h["ttl_s"] == 600 and "job" not in h
    assert seen[0] != seen[1], "each epoch has its own order"
    method, path, _ = recorder.requests[0]
    u = urllib.parse.urlsplit(path)
    assert (method, u.path, urllib.parse.parse_qs(u.query)) == ("POST", "/v1/buckets/train", {"provider": ["ht"]})
    assert s.last_reply == {"job": "default", "epoch": 2, "names": 50, "targets": []}


def test_name_of_callable_or_list_and_batches(recorder):
    client = fasttier.Client(recorder.url)
    batches = [[3, 1], [0, 2]]
    s = fasttier.HintedSampler(batches, client, "b", name_of=lambda i: "obj/%d" % i, epoch=5, job="j1")
    assert list(s) == batches, "a batch sampler's batches are yielded as they were"
    s2 = fasttier.HintedSampler([2, 0], client, "b", name_of=["x", "y", "z"])
    assert list(s2) == [2, 0]
    h = recorder.hints()
    assert h[0] == {"epoch": 5, "objnames": ["obj/3", "obj/1", "obj/0", "obj/2"], "job": "j1"}
    assert h[1] == {"epoch": 0, "objnames": ["z", "x"]}


def test_data_source_of_the_sampler_and_set_epoch(recorder):
    class DataSourceSampler(FakeSampler):
        def __init__(self, ds):
            super().__init__(len(ds))
            self.data_source = ds

    ds = Dataset(5)
    ds.keys = ["k%d" % i for i in range(5)]
    inner = DataSourceSampler(ds)
    s = fasttier.HintedSampler(inner, fasttier.Client(recorder.url), "b", attr="keys")
    s.set_epoch(7)
    assert inner.epochs_set == [7]
    order = list(s)
    [h] = recorder.hints()
    assert h["epoch"] == 7 and h["objnames"] == ["k%d" % i for i in order]
    list(s)
    assert recorder.hints()[1]["epoch"] == 8


def test_distributed_ranks_get_their_own_job(recorder):
    class Ranked(FakeSampler):
        rank, num_replicas = 1, 4

    s = fasttier.HintedSampler(Ranked(4), fasttier.Client(recorder.url), "b", name_of=str)
    list(s)
    assert recorder.hints()[0]["job"] == "rank1"


def test_refused_hint_raises_with_the_clusters_message(recorder):
    recorder.replies.append((413, {"status": 413, "message": "order hint of 9 names: more than hint_max_names 5"}))
    s = fasttier.HintedSampler(FakeSampler(9), fasttier.Client(recorder.url), "b", name_of=str)
    with pytest.raises(fasttier.FastTierError) as e:
        iter(s)
    assert e.value.status == 413 and "hint_max_names" in e.value.message
    assert "POST %s/v1/buckets/b?provider=ais: 413: " % recorder.url in str(e.value)
    # on_error="warn": the epoch goes on without a hint.
    recorder.replies.append((404, {"status": 404, "message": "bucket ais://b does not exist"}))
    s = fasttier.HintedSampler(FakeSampler(9), fasttier.Client(recorder.url), "b", name_of=str, on_error="warn")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        order = list(s)
    assert sorted(order) == list(range(9)) and s.last_reply is None
    assert len(w) == 1 and "does not exist" in str(w[0].message) and "epoch 0" in str(w[0].message)
    # A non-JSON error body is shown as text.
    recorder.replies.append((502, b"bad gateway"))
    with pytest.raises(fasttier.FastTierError, match="502: bad gateway"):
        fasttier.Client(recorder.url).post_order_hint("b", ["a"], epoch=0)


def test_unreachable_cluster():
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        port = sk.getsockname()[1]
    client = fasttier.Client("http://127.0.0.1:%d" % port, timeout=5)
    with pytest.raises(fasttier.FastTierError) as e:
        client.post_order_hint("b", ["a"], epoch=0)
    assert e.value.status is None and "no answer" in str(e.value) and str(port) in str(e.value)


def test_errors_and_repr_hide_url_secrets(recorder):
    """A password in the proxy URL, a redirect's signature in the URL requests failed on: neither reaches an
    exception's message or the client's repr."""
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        port = sk.getsockname()[1]
    client = fasttier.Client("http://u:S3CRET@127.0.0.1:%d" % port, timeout=5)
    assert "S3CRET" not in repr(client) and "127.0.0.1:%d" % port in repr(client)
    with pytest.raises(fasttier.FastTierError) as e:
        client.post_order_hint("b", ["a"], epoch=0)
    assert "S3CRET" not in str(e.value) and "POST http://127.0.0.1:%d/v1/buckets/b?provider=ais" % port in str(e.value)
    with pytest.raises(ValueError) as v:
        fasttier.Client("ftp://u:S3CRET@h/")
    assert "S3CRET" not in str(v.value)
    # the proxy's 307 to a target carries ft_sig; the target is gone: requests names the URL it failed on
    recorder.replies.append((307, {}, {"Location": "http://127.0.0.1:%d/v1/objects/b/o?ft_exp=1&ft_sig=S3CRET" % port}))
    with pytest.raises(fasttier.FastTierError) as e:
        fasttier.Client(recorder.url, timeout=5).get("b", "o")
    assert e.value.status is None and "S3CRET" not in str(e.value) and "S3CRET" not in e.value.message, str(e.value)
    assert "ft_sig=***" in str(e.value), str(e.value)


def test_bad_arguments_fail_before_sending(recorder):
    c = fasttier.Client(recorder.url)
    cases = [
        (lambda: c.post_order_hint("b", [], epoch=0), ValueError, "empty"),
        (lambda: c.post_order_hint("b", "abc", epoch=0), TypeError, "single str"),
        (lambda: c.post_order_hint("b", ["a", 3], epoch=0), TypeError, r"names\[1\]"),
        (lambda: c.post_order_hint("b", ["a"], epoch=-1), ValueError, "epoch"),
        (lambda: c.post_order_hint("b", ["a"], epoch=True), ValueError, "epoch"),
        (lambda: c.post_order_hint("b", ["a"], epoch=0, ttl_s=0), ValueError, "ttl_s"),
        (lambda: c.post_order_hint("b", ["a"], epoch=0, job="a b"), ValueError, "job"),
        (lambda: c.post_order_hint("", ["a"], epoch=0), ValueError, "bucket"),
        (lambda: fasttier.Client("localhost:1"), ValueError, "http://"),
        (lambda: fasttier.HintedSampler([0], c, "b"), ValueError, "name_of="),
        (lambda: fasttier.HintedSampler([0], c, "b", dataset=object()), ValueError, "no attribute 'objnames'"),
        (lambda: fasttier.HintedSampler([0], c, "b", name_of=5), TypeError, "name_of"),
        (lambda: fasttier.HintedSampler(5, c, "b", name_of=str), TypeError, "iterable"),
        (lambda: fasttier.HintedSampler([0], c, "b", name_of=str, on_error="ignore"), ValueError, "on_error"),
        (lambda: iter(fasttier.HintedSampler([0, 7], c, "b", name_of=["a"])), ValueError, "index 7"),
        (lambda: iter(fasttier.HintedSampler(["x"], c, "b", name_of=str)), TypeError, "not an index"),
        (lambda: iter(fasttier.HintedSampler([0], c, "b", name_of=lambda i: None)), TypeError, "non-empty str"),
    ]
    for fn, exc, words in cases:
        with pytest.raises(exc, match=words):
            fn()
    assert recorder.requests == []


def test_no_torch_at_import():
    import subprocess
    import sys
    code = "import sys, fasttier; assert 'torch' not in sys.modules, 'fasttier imported torch'"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={"PYTHONPATH": fasttier.__path__[0].rsplit("/", 1)[0]})
    assert p.returncode == 0, p.stderr


def test_client_sends_the_token_from_the_environment_or_the_state_dir(recorder, monkeypatch, tmp_path):
    monkeypatch.delenv("FT_TOKEN", raising=False)
    monkeypatch.delenv("FT_STATE_DIR", raising=False)
    fasttier.Client(recorder.url).post_order_hint("b", ["x"], 0)
    monkeypatch.setenv("FT_TOKEN", "from-env")
    fasttier.Client(recorder.url).post_order_hint("b", ["x"], 1)
    fasttier.Client(recorder.url, token="explicit").post_order_hint("b", ["x"], 2)
    monkeypatch.delenv("FT_TOKEN")
    (tmp_path / "token").write_text("from-state-dir\n")
    monkeypatch.setenv("FT_STATE_DIR", str(tmp_path))
    fasttier.Client(recorder.url).post_order_hint("b", ["x"], 3)
    assert recorder.authorization == [None, "Bearer from-env", "Bearer explicit", "Bearer from-state-dir"]
