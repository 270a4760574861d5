# SPDX-License-Identifier: Apache-2.0
# Listing the buckets of a remote provider's account (GET /v1/buckets?provider=aws|gcp|azure) against the emulators.
"""The targets' environment names the account (docs/backends.md); the proxy asks one target.

gcp runs against firebase-tools' storage emulator with its rules engine switched off, whose bucket
list tests/peers/firebase-offline.js also serves at the JSON API's path (GET /storage/v1/b).
"""
import base64
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import peers
from conftest import FT_BIN, run_cluster
from ftutil import TIMEOUT, add_key, assert_json_error, create_remote, session, unique
from test_remote_list import gcs_put, s3_client

PROVIDERS = ["aws", "azure", "gcp"]
ALIASES = {"aws": "s3", "azure": "az", "gcp": "gs"}
CREATED = ["rb-alpha", "rb-beta", "rb-gamma"]  # in each account, besides the emulator's ft-backend-test


class Accounts:
    """The three emulators, each holding CREATED; env() is the targets' environment naming them."""

    def __init__(self, s3, az, gcs):
        self.peer = {"aws": s3, "azure": az, "gcp": gcs}

    def endpoint(self, provider):
        return self.peer[provider].url

    def env(self, aws_key="S3RVER", aws_secret="S3RVER", azure_key=None, project="demo-test", down=None):
        az = self.peer["azure"]
        e = {"AWS_ENDPOINT_URL": down or self.endpoint("aws"), "AWS_ACCESS_KEY_ID": aws_key,
             "AWS_SECRET_ACCESS_KEY": aws_secret, "AWS_REGION": "us-east-1",
             "AZURE_STORAGE_CONNECTION_STRING": "DefaultEndpointsProtocol=http;AccountName=%s;AccountKey=%s;"
             "BlobEndpoint=%s" % (az.account, azure_key or az.key,
                                  (down + "/" + az.account) if down else az.url),
             "STORAGE_EMULATOR_HOST": down or self.endpoint("gcp"), "GOOGLE_CLOUD_PROJECT": project}
        for k in ("AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3", "AWS_DEFAULT_REGION", "AZURE_STORAGE_ACCOUNT",
                  "AZURE_STORAGE_KEY", "AZURE_STORAGE_ACCESS_KEY", "AZURE_STORAGE_SAS_TOKEN",
                  "GOOGLE_APPLICATION_CREDENTIALS"):
            e[k] = ""  # nothing of the runner's own environment decides
        return e


@pytest.fixture(scope="module")
def accounts():
    peers.ensure_installed()
    d = peers.scratch_dir()
    started = []
    try:
        for start, sub in ((peers.start_s3rver, "aws"), (peers.start_azurite, "azure"), (peers.start_gcs, "gcp")):
            started.append(start(os.path.join(d, sub)))
        s3, az, gcs = started
        client = s3_client(s3)
        for name in CREATED:
            client.create_bucket(Bucket=name)
            peers.azure_create_container(az, name)
            gcs_put(gcs, name, "o", b"x")  # the emulator makes a bucket on first use
        yield Accounts(s3, az, gcs)
    finally:
        for p in started:
            p.stop()
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def rcluster(accounts, tmp_path_factory):
    yield from run_cluster(tmp_path_factory, "rbk", "these tests set the targets' environment", targets=2,
                           mountpaths=1, env=accounts.env())


def list_buckets(h, provider, token="", **params):
    return session(token=token).get(h.url + "/v1/buckets", params={"provider": provider, **params},
                                    timeout=TIMEOUT)


def by_name(r):
    assert r.status_code == 200, r.text
    return {b["name"]: b for b in r.json()}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_lists_the_accounts_buckets(rcluster, provider):
    got = by_name(list_buckets(rcluster, provider))
    assert set(CREATED) | {"ft-backend-test"} <= set(got), got
    for b in got.values():
        assert b["provider"] == provider and b["present"] is False and "cluster_buckets" not in b
    # the aliases name the same provider; HEAD answers without a body
    assert set(by_name(list_buckets(rcluster, ALIASES[provider]))) == set(got)
    r = session(token="").head(rcluster.url + "/v1/buckets", params={"provider": provider}, timeout=TIMEOUT)
    assert r.status_code == 200 and r.content == b""


@pytest.mark.parametrize("provider", PROVIDERS)
def test_present_buckets_are_marked(rcluster, accounts, provider):
    same = CREATED[1]  # a cluster bucket of the remote bucket's own name, its endpoint spelled out
    fronting = unique("rbf")  # another name in the cluster, the targets' endpoint
    elsewhere = unique("rbe")  # CREATED[2] at another endpoint: not this account's bucket
    props = {"aws": {"addressing": "path"}, "azure": {}, "gcp": {}}[provider]
    create_remote(rcluster.url, fronting, provider, dict(props, bucket=CREATED[0]))
    create_remote(rcluster.url, same, provider, dict(props, bucket=same, endpoint=accounts.endpoint(provider) + "/"))
    create_remote(rcluster.url, elsewhere, provider, dict(props, bucket=CREATED[2], endpoint="http://127.0.0.1:1"))
    try:
        got = by_name(list_buckets(rcluster, provider))
        assert got[CREATED[0]]["present"] is True and got[CREATED[0]]["cluster_buckets"] == [fronting]
        assert got[same]["present"] is True and got[same]["cluster_buckets"] == [same]
        assert got[CREATED[2]]["present"] is False and got["ft-backend-test"]["present"] is False
        assert fronting not in got and elsewhere not in got
        # AIStore's presence filter: 2 (present) lists the cluster's buckets, as GET /v1/buckets lists them
        present = by_name(list_buckets(rcluster, provider, presence=2))
        assert set(present) == {fronting, same, elsewhere}
        assert all(b["present"] is True and b["provider"] == provider and "backend" in b for b in present.values())
        # 5 (exists outside): only what the cluster does not have
        outside = by_name(list_buckets(rcluster, provider, presence=5))
        assert set(outside) == set(got) - {CREATED[0], same}
        assert all(b["present"] is False for b in outside.values())
    finally:
        for b in (fronting, same, elsewhere):
            session(token="").delete("%s/v1/buckets/%s?provider=%s" % (rcluster.url, b, provider), timeout=TIMEOUT)


def test_aistore_list_buckets_message(rcluster):
    # AIStore's SDK: GET /v1/buckets?provider=aws with the action message {"action": "list"}; its Go API adds presence.
    r = session(token="").get(rcluster.url + "/v1/buckets", params={"provider": "aws", "presence": "0"},
                              json={"action": "list", "name": "list"}, timeout=TIMEOUT)
    got = by_name(r)
    assert set(CREATED) <= set(got) and all(set(b) >= {"name", "provider"} for b in got.values())


def test_ht_unknown_provider_and_bad_presence(rcluster):
    r = list_buckets(rcluster, "ht")
    assert_json_error(r, 400, "HTTP origin")
    b = unique("rbh")
    create_remote(rcluster.url, b, "ht", {"endpoint": "http://127.0.0.1:1/files"})
    try:
        got = by_name(list_buckets(rcluster, "ht", presence=2))
        assert list(got) == [b] and got[b]["present"] is True
    finally:
        session(token="").delete("%s/v1/buckets/%s?provider=ht" % (rcluster.url, b), timeout=TIMEOUT)
    assert_json_error(list_buckets(rcluster, "nosuch"), 400, "unknown provider")
    for bad in ("9", "x", "-1", "22"):
        assert_json_error(list_buckets(rcluster, "aws", presence=bad), 400, "presence")
    r = session(token="").post(rcluster.url + "/v1/buckets?provider=aws", json={"action": "list"}, timeout=TIMEOUT)
    assert_json_error(r, 400, "missing bucket name")


def logs_of(h):
    return "".join(p.read_text(errors="replace") for p in Path(h.c.dir).rglob("*.log"))


def test_refused_credentials_and_missing_project(accounts, make_cluster):
    aws_secret = "aws-secret-" + unique("s")
    azure_key = base64.b64encode(os.urandom(64)).decode()  # a well-formed key, not the account's
    h = make_cluster(targets=2, mountpaths=1, env=accounts.env(aws_key="WRONGKEY", aws_secret=aws_secret,
                                                               azure_key=azure_key, project=""))
    assert_json_error(list_buckets(h, "aws"), 403, "InvalidAccessKeyId")
    assert_json_error(list_buckets(h, "azure"), 403, "failed to authenticate")
    assert_json_error(list_buckets(h, "gcp"), 500, "GOOGLE_CLOUD_PROJECT")
    seen = [list_buckets(h, p).text for p in PROVIDERS] + [logs_of(h)]
    for text in seen:
        assert aws_secret not in text and azure_key not in text


def test_unreachable_account(accounts, make_cluster):
    port = peers.free_port()  # nothing listens there
    h = make_cluster(targets=2, mountpaths=1, env=accounts.env(down="http://127.0.0.1:%d" % port))
    for provider in PROVIDERS:
        assert_json_error(list_buckets(h, provider), 502, "listing the buckets of %s" % provider)


def test_auth_on(accounts, make_cluster):
    h = make_cluster(targets=2, mountpaths=1, env=accounts.env(), auth=True)
    assert_json_error(list_buckets(h, "aws"), 401)
    assert set(CREATED) <= set(by_name(list_buckets(h, "aws", token=h.c.token)))
    # readonly is enough (docs/security.md)
    token = add_key(h, "RBRO", "rbro-secret-0123456789", "readonly")
    assert set(CREATED) <= set(by_name(list_buckets(h, "azure", token=token)))


def ft(h, *args):
    e = {k: v for k, v in os.environ.items() if not k.startswith("FT_")}
    e.update(HOME="/nonexistent", FT_ENDPOINT=h.url)
    p = subprocess.run([os.path.join(FT_BIN, "ft"), *args], env=e, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def test_cli(rcluster):
    rc, out, err = ft(rcluster, "bucket", "ls", "s3:")
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "PROVIDER", "PRESENT", "CLUSTER", "BUCKETS"]
    rows = {ln.split()[0]: ln.split() for ln in lines[1:]}
    assert set(CREATED) <= set(rows) and rows[CREATED[0]][1:] == ["aws", "no", "-"]
    rc, out, err = ft(rcluster, "bucket", "ls", "--provider", "azure", "--json")
    assert rc == 0, err
    assert set(CREATED) <= {b["name"] for b in json.loads(out)}
    rc, out, err = ft(rcluster, "bucket", "ls", "gs://", "--present", "--json")
    assert rc == 0 and json.loads(out) == [], (out, err)
    rc, out, err = ft(rcluster, "bucket", "ls", "nosuch:")
    assert rc == 2 and "unknown provider" in err
    rc, out, err = ft(rcluster, "bucket", "ls", "s3:", "--provider", "gcp")
    assert rc == 2 and "two providers" in err
