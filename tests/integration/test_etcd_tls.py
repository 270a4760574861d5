# SPDX-License-Identifier: Apache-2.0
"""Several proxies on an etcd that speaks TLS and asks every client for a certificate of the cluster CA (what
ft-cluster starts with tls on): the proxies elect a primary and change metadata through it with their own
certificates; a client without one, or over plain HTTP, gets nothing from etcd; a proxy given a key that is not its
certificate's refuses to start."""
import os
import subprocess

import pytest
import requests

from conftest import FT_BIN, module_cluster
from ftutil import Api, bucket_path, unique, wait_until

TIMEOUT = 30

ecluster = module_cluster("etcdtls", "it starts three proxies on a local etcd over TLS", targets=1, mountpaths=1,
                          proxies=3, lease_ttl=3, tls=True, auth=True)


def pki(h):
    d = os.path.join(h.c.dir, "tls")
    return os.path.join(d, "ca.pem"), os.path.join(d, "server.pem"), os.path.join(d, "server.key")


def test_proxies_use_etcd_over_tls(ecluster):
    assert ecluster.c.etcd_url.startswith("https://")
    ca, _, _ = pki(ecluster)
    primaries = []
    for p in ecluster.c.proxies:
        s = Api(p.public_url, token=ecluster.token).s
        s.verify = ca
        primaries.append(s.get(p.public_url + "/v1/health", timeout=TIMEOUT).json().get("primary") is True)
    assert primaries.count(True) == 1, primaries
    follower = ecluster.c.proxies[primaries.index(False)]
    api = Api(follower.public_url, token=ecluster.token)
    api.s.verify = ca
    b = unique("etls")
    r = api.s.post(api.url + bucket_path(b), json={"action": "create-bck"}, timeout=TIMEOUT)
    assert r.status_code == 200, r.text  # made by the primary, committed to etcd over TLS
    for p in ecluster.c.proxies:
        s = Api(p.public_url, token=ecluster.token).s
        s.verify = ca
        wait_until(lambda: s.head(p.public_url + bucket_path(b), timeout=5).status_code == 200, 10,
                   what="every proxy to know the bucket")


def test_etcd_refuses_clients_without_a_certificate(ecluster):
    ca, cert, key = pki(ecluster)
    url = ecluster.c.etcd_url
    r = requests.get(url + "/health", verify=ca, cert=(cert, key), timeout=TIMEOUT)
    assert r.status_code == 200 and r.json().get("health") == "true", r.text
    with pytest.raises((requests.exceptions.SSLError, requests.exceptions.ConnectionError)):
        requests.get(url + "/health", verify=ca, timeout=TIMEOUT)
    try:
        plain = requests.post(url.replace("https://", "http://") + "/v3/kv/range", json={"key": "Lw=="},
                              timeout=TIMEOUT)
        assert plain.status_code == 400 and "kvs" not in plain.text, plain.text
    except requests.exceptions.ConnectionError:
        pass  # refused outright: nothing read either


def test_a_key_that_is_not_the_certificates_refuses_to_start(ecluster, tmp_path):
    ca, cert, _ = pki(ecluster)
    other = tmp_path / "other.key"
    subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out",
                    str(other)], check=True, capture_output=True)
    argv = [os.path.join(FT_BIN, "ft-proxy"), "--public_port", "1", "--control_port", "2", "--state_dir",
            str(tmp_path / "p"), "--etcd", ecluster.c.etcd_url, "--etcd_cert", cert, "--etcd_key", str(other),
            "--tls_ca", ca]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode != 0
    assert "etcd_key" in r.stderr and "not the key of etcd_cert" in r.stderr, r.stderr
    r = subprocess.run(argv[:-4] + ["--etcd_cert", cert, "--tls_ca", ca], capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert r.returncode != 0 and "etcd_cert and etcd_key go together" in r.stderr, r.stderr
