# SPDX-License-Identifier: Apache-2.0
"""GET /metrics on every daemon: Prometheus text checked by promtool, counters that follow the requests, a real
Prometheus scraping a local cluster, and JSON log lines with --log-format json."""
import json
import os
import re
import subprocess

import pytest

import peers
from conftest import FT_BIN
from ftutil import Api, create_remote, obj_url, session, unique, wait_until
from test_coldget import put_origin

origin = peers.nginx_origin_fixture()

SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def scrape(url):
    r = session().get(url + "/metrics", timeout=10)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    return r.text


def parse(text):
    """{(name, ((label, value), ...)): float} of every sample line."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE_RE.match(line)
        assert m, "not a sample line: %r" % line
        labels = tuple(sorted(LABEL_RE.findall(m.group(2) or "")))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def value(samples, name, **labels):
    """The sum of name's samples whose labels include labels (0 when none)."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= set(ls))


def node_urls(cluster):
    return [cluster.url] + [t["public_url"] for t in cluster.targets()]


def targets_value(cluster, name, **labels):
    return sum(value(parse(scrape(t["public_url"])), name, **labels) for t in cluster.targets())


def promtool_check(text):
    proc = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_metrics_text_passes_promtool_and_counts_requests(cluster, api):
    b = unique("met")
    api.create_bucket(b)
    before_proxy = parse(scrape(cluster.url))
    before_put = targets_value(cluster, "ft_http_requests_total", op="PUT", code="2xx")
    before_bytes = targets_value(cluster, "ft_http_request_bytes_total", op="PUT", code="2xx")
    before_get = targets_value(cluster, "ft_http_request_duration_seconds_count", op="GET", cache="warm")
    body = os.urandom(20000)
    for i in range(5):
        api.put(b, "o%d" % i, body)
        assert api.get(b, "o%d" % i).content == body
    for url in node_urls(cluster):
        promtool_check(scrape(url))
    proxy = parse(scrape(cluster.url))
    # Every PUT and GET went to the proxy first and was redirected.
    assert value(proxy, "ft_http_requests_total", op="PUT", code="3xx") - \
        value(before_proxy, "ft_http_requests_total", op="PUT", code="3xx") >= 5
    assert value(proxy, "ft_http_requests_total", op="GET", code="3xx") - \
        value(before_proxy, "ft_http_requests_total", op="GET", code="3xx") >= 5
    assert value(proxy, "ft_smap_targets") == len(cluster.targets())
    assert value(proxy, "ft_http_connections_total") >= 1
    assert targets_value(cluster, "ft_http_requests_total", op="PUT", code="2xx") - before_put == 5
    assert targets_value(cluster, "ft_http_request_bytes_total", op="PUT", code="2xx") - before_bytes == 5 * 20000
    assert targets_value(cluster, "ft_http_request_duration_seconds_count", op="GET", cache="warm") - before_get >= 5
    # Target-only families are not on the proxy; the proxy's are not on targets.
    assert value(proxy, "ft_cache_hits_total") == 0 and "ft_cache_hits_total" not in scrape(cluster.url)
    assert "ft_s3_relay_retries_total" not in scrape(cluster.targets()[0]["public_url"])
    api.destroy_bucket(b)


def test_metrics_mountpath_gauges(cluster):
    cluster.require_local("reads the targets' mountpath list")
    for i, t in enumerate(cluster.c.targets):
        samples = parse(scrape(t.public_url))
        for mp in t.mountpaths:
            cap = value(samples, "ft_mountpath_capacity_bytes", mountpath=mp)
            used = value(samples, "ft_mountpath_used_bytes", mountpath=mp)
            assert cap > 0 and used > 0, (t.name, mp)


def test_metrics_bad_method_and_head(cluster):
    r = session().post(cluster.url + "/metrics", data=b"x", timeout=10)
    assert r.status_code == 405 and r.headers["Allow"] == "GET, HEAD"
    assert "not allowed" in r.json()["message"]
    r = session().head(cluster.targets()[0]["public_url"] + "/metrics", timeout=10)
    assert r.status_code == 200 and r.content == b""
    r = session().get(cluster.url + "/metrics/x", timeout=10)
    assert r.status_code == 404


def test_metrics_cache_hits_misses_and_cold_bytes(cluster, origin):
    b = unique("metht")
    create_remote(cluster.url, b, "ht", {"endpoint": origin.url})
    name = unique("cold") + ".bin"
    data = os.urandom(300000)
    put_origin(origin, name, data)
    names = ["ft_cache_misses_total", "ft_cache_hits_total"]
    before = {n: targets_value(cluster, n) for n in names}
    before_cold = targets_value(cluster, "ft_coldget_bytes_total", provider="ht")
    before_hist = targets_value(cluster, "ft_http_request_duration_seconds_count", op="GET", cache="cold")
    for _ in range(2):
        r = session().get(obj_url(cluster.url, b, name), timeout=30)
        assert r.status_code == 200 and r.content == data
    assert targets_value(cluster, "ft_cache_misses_total") - before["ft_cache_misses_total"] == 1
    assert targets_value(cluster, "ft_cache_hits_total") - before["ft_cache_hits_total"] == 1
    assert targets_value(cluster, "ft_coldget_bytes_total", provider="ht") - before_cold == len(data)
    assert targets_value(cluster, "ft_http_request_duration_seconds_count", op="GET", cache="cold") - \
        before_hist == 1


def test_prometheus_scrapes_the_cluster(cluster, api, tmp_path):
    if not os.path.exists("/usr/bin/prometheus"):
        pytest.skip("Debian's prometheus is not installed (scripts/deps.sh installs it)")
    b = unique("prom")
    api.create_bucket(b)
    for i in range(3):
        api.put(b, "p%d" % i, b"metrics")
    prom = peers.start_prometheus(tmp_path / "prom", node_urls(cluster))
    try:
        def query(q):
            r = session().get(prom.url + "/api/v1/query", params={"query": q}, timeout=10)
            assert r.status_code == 200, r.text
            doc = r.json()
            assert doc["status"] == "success", doc
            return doc["data"]["result"]

        def scraped():
            # Each node is scraped on its own schedule: wait until every one was, then ask for the counter.
            up = query('up{job="fasttier"}')
            if len(up) < len(node_urls(cluster)):
                return False
            assert all(u["value"][1] == "1" for u in up), up
            res = query('sum(ft_http_requests_total{job="fasttier",op="PUT",code="2xx"})')
            return res and float(res[0]["value"][1]) >= 3

        wait_until(scraped, 60, interval=0.5, what="Prometheus to scrape every node and the PUT counter")
    finally:
        prom.stop()
    api.destroy_bucket(b)


def test_json_logs(make_cluster):
    c = make_cluster(targets=1, mountpaths=1, proxy_args=("--log-format", "json"),
                     target_args=("--log-format=json",))
    session().get(c.url + "/v1/health", timeout=10)
    for path in c.c.log_paths():
        # The launcher's own "==== ... starting" lines are not the daemon's.
        lines = [ln for ln in open(path, errors="replace").read().splitlines()
                 if ln.strip() and not ln.startswith("==== ")]
        assert lines, path
        for ln in lines:
            doc = json.loads(ln)
            assert set(doc) == {"time", "level", "name", "msg"}, ln
            assert doc["level"] in ("debug", "info", "warn", "error")
            assert doc["name"] in ("ft-proxy", "ft-target")
        assert any("ready" in json.loads(ln)["msg"] for ln in lines), path


@pytest.mark.parametrize("exe", ["ft-proxy", "ft-target"])
def test_bad_log_format_refused(exe, tmp_path):
    proc = subprocess.run([os.path.join(FT_BIN, exe), "--log-format", "xml", "--state_dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert "log_format" in proc.stderr and "text|json" in proc.stderr


def test_job_and_eviction_metrics(make_cluster, origin):
    # A target added to a cluster: every target runs a rebalance job, counted by kind; then the LRU of a small
    # quota evicts cached remote objects, counted with their bytes.
    mib = 1 << 20
    c = make_cluster(targets=1, mountpaths=1,
                     target_args=("--lru_quota_bytes", str(4 * mib), "--lru_high_pct", "80", "--lru_low_pct", "50",
                                  "--lru_interval_ms", "100"))
    api = Api(c.url, session())
    b = unique("metjob")
    api.create_bucket(b)
    for i in range(20):
        api.put(b, "r%02d" % i, b"x" * 1000)
    c.add_target()

    def rebalanced():
        samples = [parse(scrape(t["public_url"])) for t in c.targets()]
        done = sum(value(s, "ft_job_objects_total", kind="rebalance") for s in samples)
        running = sum(value(s, "ft_jobs_running") for s in samples)
        return done > 0 and running == 0

    wait_until(rebalanced, 30, interval=0.2, what="the rebalance to move objects and end")
    hb = unique("metlru")
    create_remote(c.url, hb, "ht", {"endpoint": origin.url})
    for i in range(24):  # 12 MiB over two targets: past the 4 MiB quota's high mark on each, however they split
        name = unique("ev") + ".bin"
        put_origin(origin, name, os.urandom(mib // 2))
        r = session().get(obj_url(c.url, hb, name), timeout=30)
        assert r.status_code == 200

    def evicted():
        return targets_value(c, "ft_lru_evicted_objects_total") > 0

    wait_until(evicted, 30, interval=0.2, what="the LRU to evict")
    assert targets_value(c, "ft_lru_evicted_bytes_total") >= mib // 2
