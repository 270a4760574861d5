# SPDX-License-Identifier: Apache-2.0
"""Several proxies on etcd: a follower takes bucket metadata changes (native, S3, the ETL registry) and has the
primary make them; the client reads its change on that follower at once, and on every proxy; errors come back as
the primary found them (409, 404, 400); a remote bucket's backend secret never reaches a public answer."""
import json

import botocore.exceptions
import pytest

import s3util
from conftest import module_cluster
from ftutil import Api, assert_json_error, bucket_path, unique, wait_until

TIMEOUT = 30

px3 = module_cluster("followermeta", "it starts three proxies on a local etcd", targets=2, mountpaths=1, proxies=3,
                     lease_ttl=3, auth=True)


def roles(h):
    """(primary, [followers]) by /v1/health."""
    primary, followers = None, []
    for p in h.c.proxies:
        j = Api(p.public_url, token=h.token).s.get(p.public_url + "/v1/health", timeout=5).json()
        if j.get("primary") is True:
            primary = p
        else:
            followers.append(p)
    assert primary is not None and len(followers) == 2
    return primary, followers


def props(api, bucket):
    r = api.s.head(api.url + bucket_path(bucket), timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return json.loads(r.headers["Ais-Bucket-Props"])


def test_native_bucket_changes_through_a_follower(px3):
    primary, (f1, f2) = roles(px3)
    api = Api(f1.public_url, token=px3.token)
    b = unique("fm")
    r = api.s.post(api.url + bucket_path(b), json={"action": "create-bck", "value": {"mirror": {"copies": 2}}},
                   timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    assert props(api, b)["mirror"]["copies"] == 2  # read on the same follower at once
    for p in (primary, f2):
        wait_until(lambda: Api(p.public_url, token=px3.token).s.head(p.public_url + bucket_path(b), timeout=5)
                   .status_code == 200, 10, what="every proxy knows the bucket")
    api.put(b, "o1", b"data through a follower")
    assert api.get(b, "o1").content == b"data through a follower"
    # errors as the primary found them
    assert_json_error(api.s.post(api.url + bucket_path(b), json={"action": "create-bck"}, timeout=TIMEOUT), 409,
                      "exists")
    r = api.s.post(api.url + bucket_path(b), json={"action": "set-bprops", "value": {"ec": {"data_slices": 30}}},
                   timeout=TIMEOUT)
    assert_json_error(r, 400)
    r = api.s.post(api.url + bucket_path(b), json={"action": "set-bprops", "value": {"mirror": {"copies": 1}}},
                   timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    assert props(api, b)["mirror"]["copies"] == 1
    assert_json_error(api.s.post(api.url + bucket_path("fm-none"),
                                 json={"action": "set-bprops", "value": {"mirror": {"copies": 1}}}, timeout=TIMEOUT),
                      404)
    api.destroy_bucket(b)
    assert api.s.head(api.url + bucket_path(b), timeout=TIMEOUT).status_code == 404
    api.destroy_bucket(b, expect=404)


def test_s3_bucket_changes_through_a_follower(px3):
    _, (f1, _) = roles(px3)
    s3 = s3util.client(px3, url=f1.public_url + "/s3")
    b = s3util.bucket_name("fms3")
    s3.create_bucket(Bucket=b)
    s3.head_bucket(Bucket=b)
    s3.put_object(Bucket=b, Key="k", Body=b"v")
    s3.put_bucket_acl(Bucket=b, ACL="private")
    assert s3.get_object(Bucket=b, Key="k")["Body"].read() == b"v"
    s3.delete_object(Bucket=b, Key="k")
    s3.delete_bucket(Bucket=b)
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.head_bucket(Bucket=b)
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


def test_etl_registry_through_a_follower(px3):
    primary, (f1, _) = roles(px3)
    api = Api(f1.public_url, token=px3.token)
    name = unique("fmetl").lower().replace("_", "-")[:30]
    r = api.s.post(api.url + "/v1/etl", json={"name": name, "command": ["tr", "a-z", "A-Z"]}, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    assert api.s.get(api.url + "/v1/etl/" + name, timeout=TIMEOUT).status_code == 200
    r = api.s.post(api.url + "/v1/etl", json={"name": name, "command": ["cat"]}, timeout=TIMEOUT)
    assert_json_error(r, 409)
    pa = Api(primary.public_url, token=px3.token)
    assert pa.s.get(pa.url + "/v1/etl/" + name, timeout=TIMEOUT).status_code == 200
    assert api.s.delete(api.url + "/v1/etl/" + name, timeout=TIMEOUT).status_code == 200
    assert_json_error(api.s.delete(api.url + "/v1/etl/" + name, timeout=TIMEOUT), 404)
    # a URL transformer goes to the primary with its URL sealed and is stored opened: every proxy shows it redacted
    r = api.s.post(api.url + "/v1/etl", timeout=TIMEOUT,
                   json={"name": name, "url": "http://u:PW%s@127.0.0.1:1/t?token=TOK" % name})
    assert r.status_code == 200, r.text
    for a in (api, pa):
        assert a.s.get(a.url + "/v1/etl/" + name, timeout=TIMEOUT).json()["url"] == "http://127.0.0.1:1/t?token=***"
    assert api.s.delete(api.url + "/v1/etl/" + name, timeout=TIMEOUT).status_code == 200


def test_remote_bucket_secret_stays_sealed(px3):
    """A remote bucket created through a follower: its backend secret reaches the primary sealed and never comes
    back on a public port."""
    _, (f1, _) = roles(px3)
    api = Api(f1.public_url, token=px3.token)
    b = unique("fmrem").lower().replace("_", "-")
    secret = "planted-secret-" + unique("s")
    backend = {"endpoint": "http://127.0.0.1:9", "access_key": "AKIAFOLLOWER", "secret_key": secret}
    r = api.s.post("%s/v1/buckets/%s?provider=aws" % (api.url, b),
                   json={"action": "create-bck", "value": {"backend": backend}}, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    for p in px3.c.proxies:
        text = Api(p.public_url, token=px3.token).s.get(p.public_url + "/v1/cluster?what=bmd", timeout=10).text
        assert b in text and secret not in text
    for p in px3.c.proxies:
        with open(p.log, errors="replace") as f:
            assert secret not in f.read(), p.log
    r = api.s.delete("%s/v1/buckets/%s?provider=aws" % (api.url, b), timeout=TIMEOUT)
    assert r.status_code == 200, r.text


def test_maintenance_through_a_follower(px3):
    """Cluster actions asked of a follower are made by the primary; the asking follower's own map shows them at once,
    errors come back as the primary found them."""
    primary, (f1, f2) = roles(px3)
    a1, a2 = Api(f1.public_url, token=px3.token), Api(f2.public_url, token=px3.token)
    sid = a1.smap()["targets"][0]["id"]

    def flags(api):
        return [t.get("flags", 0) for t in api.smap()["targets"] if t["id"] == sid]

    r = a1.s.put(a1.url + "/v1/cluster", json={"action": "start-maintenance", "value": {"sid": sid}}, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    assert r.json()["sid"] == sid
    assert flags(a1) == [1]  # on the asking follower at once
    pa = Api(primary.public_url, token=px3.token)
    wait_until(lambda: flags(pa) == [1] and flags(a2) == [1], 10, what="every proxy to see the maintenance flag")
    r = a2.s.put(a2.url + "/v1/cluster", json={"action": "stop-maintenance", "value": {"sid": sid}}, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    assert flags(a2) == [0]
    wait_until(lambda: flags(pa) == [0] and flags(a1) == [0], 10, what="every proxy to see the flag cleared")
    assert_json_error(a1.s.put(a1.url + "/v1/cluster", json={"action": "start-maintenance",
                                                            "value": {"sid": "no-such-target"}}, timeout=TIMEOUT),
                      404, "no-such-target")
    assert_json_error(a1.s.put(a1.url + "/v1/cluster", json={"action": "start-maintenance"}, timeout=TIMEOUT), 400,
                      "sid")
