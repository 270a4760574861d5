# SPDX-License-Identifier: Apache-2.0
# ft-loader against a cluster whose public ports speak TLS: PUT/GET (-verifyhash), -direct, GetBatch, https URL lists, bad CAs.
import os
import re
import socket
import threading
import urllib.parse

import pytest

import ftcluster
from conftest import module_cluster
from ftutil import Api, session, unique
from test_loader import (TAR_END, batch_member_bytes, batch_objects, check_json_adds_up, listed, loader_binary,
                         run_loader)

tcluster = module_cluster("loader_tls", "it starts its own cluster with HTTPS public ports", targets=2, tls=True)
# GetBatch where every item is the one target's: no target pulls parts from another (see test_getbatch_across_targets)
onecluster = module_cluster("loader_tls1", "it starts its own cluster with HTTPS public ports", targets=1, tls=True)

__all__ = ["loader_binary"]  # the module's autouse check that ft-loader is built


@pytest.fixture(scope="module")
def ca(tcluster):
    return tcluster.c.ca_file


def https_api(c):
    """A native API client of cluster c verifying its certificates with the cluster's CA."""
    s = session("")
    s.verify = c.c.ca_file
    return Api(c.url, s)


@pytest.fixture(scope="module")
def tapi(tcluster):
    return https_api(tcluster)


@pytest.fixture
def bucket(tapi):
    b = unique("ldtls")
    tapi.create_bucket(b)
    yield b
    tapi.destroy_bucket(b, expect=None)


@pytest.fixture(scope="module")
def wrong_ca(tmp_path_factory):
    """A CA of its own (fresh key, same subject as the cluster's): it signed nothing the cluster shows."""
    ca, _, _ = ftcluster.ensure_tls(str(tmp_path_factory.mktemp("wrongca")), ["127.0.0.1"])
    return ca


def https_args(tcluster, ca):
    """-ip, -port and -https of the cluster's proxy, and -cacert ca unless ca is None."""
    u = urllib.parse.urlsplit(tcluster.url)
    assert u.scheme == "https"
    return ["-ip", u.hostname, "-port", str(u.port), "-https"] + (["-cacert", ca] if ca is not None else [])


@pytest.mark.parametrize("direct", [False, True])
def test_put_then_verified_gets_over_tls(tcluster, tapi, ca, bucket, tmp_path, direct):
    """PUTs (bodies up to 600 KiB: many TLS records each way), then every object read back with -verifyhash:
    through the proxy's 307 to the targets' https ports, or (-direct) straight to them from the cluster map."""
    extra = ["-direct"] if direct else []
    r = run_loader(tmp_path, https_args(tcluster, ca) + [
        "-bucket", bucket, "-pctput", "100", "-maxputs", "60", "-minsize", "1KiB", "-maxsize", "600KiB",
        "-numworkers", "8", "-loaderid", "t", "-verifyhash", "-statsinterval", "100ms"] + extra)
    assert r.rc == 0, r
    put = r.summary("PUT")
    assert put["count"] == 60 and put["errors"] == 0, r
    assert r.json["config"]["https"] is True
    check_json_adds_up(r)
    objs = listed(tapi, bucket)
    assert sorted(objs) == sorted("t-%d" % i for i in range(1, 61))
    assert sum(objs.values()) == put["bytes"]

    r = run_loader(tmp_path, https_args(tcluster, ca) + [
        "-bucket", bucket, "-epochs", "2", "-uniquegets", "-duration", "0", "-verifyhash", "-numworkers", "8",
        "-statsinterval", "100ms"] + extra)
    assert r.rc == 0, r
    get = r.summary("GET")
    assert get["count"] == 120 and get["errors"] == 0, r
    assert get["bytes"] == 2 * sum(objs.values()), r
    check_json_adds_up(r)


def test_cleanup_deletes_over_tls(tcluster, tapi, ca, tmp_path):
    """The loader creates the bucket (blocking client), PUTs, and at the end deletes its objects and the bucket."""
    b = unique("ldtlsc")
    r = run_loader(tmp_path, https_args(tcluster, ca) + [
        "-bucket", b, "-pctput", "100", "-maxputs", "20", "-minsize", "4KiB", "-maxsize", "4KiB",
        "-numworkers", "4", "-cleanup"])
    assert r.rc == 0, r
    assert r.json["cleanup"]["requests"] == 20 and r.json["cleanup"]["errors"] == 0, r
    assert tapi.s.get(tcluster.url + "/v1/buckets/" + b, timeout=30).status_code == 404


def getbatch_run(c, tmp_path, direct):
    api = https_api(c)
    b = unique("ldtlsb")
    api.create_bucket(b)
    try:
        sizes = batch_objects(api, b, 30)
        r = run_loader(tmp_path, https_args(c, c.c.ca_file) + [
            "-bucket", b, "-epochs", "1", "-uniquegets", "-get-batchsize", "7", "-numworkers", "3",
            "-duration", "0"] + (["-direct"] if direct else []))
        assert r.rc == 0, r
        gb = r.summary("GETBATCH")
        assert gb["count"] == 5 and gb["errors"] == 0 and gb["items"] == 30, r
        assert gb["bytes"] == 5 * TAR_END + sum(batch_member_bytes(b, n, sz) for n, sz in sizes.items()), r
    finally:
        api.destroy_bucket(b, expect=None)


@pytest.mark.parametrize("direct", [False, True])
def test_getbatch_over_tls(onecluster, tmp_path, direct):
    """GetBatch: the POST's JSON body re-sent on the 307 (or -direct), TAR answers walked over TLS."""
    getbatch_run(onecluster, tmp_path, direct)


def test_getbatch_across_targets_over_tls(tcluster, tmp_path):
    """The assembling target pulls the other targets' parts over https, trusting the cluster's CA (tls_ca)."""
    getbatch_run(tcluster, tmp_path, False)


def test_https_url_list_follows_redirects(tcluster, tapi, ca, bucket, tmp_path):
    """-url-list of https:// proxy URLs: TLS to the proxy, then to the target the 307 names; FT_CACERT as the
    default CA bundle (as the ft CLI reads it)."""
    for i in range(10):
        tapi.put(bucket, "u%d" % i, os.urandom(20000 + i))
    urls = tmp_path / "urls.txt"
    urls.write_text("".join("%s/v1/objects/%s/u%d\n" % (tcluster.url, bucket, i) for i in range(10)))
    env = dict(os.environ, FT_CACERT=ca)
    env.pop("FT_STATE_DIR", None)
    r = run_loader(tmp_path, ["-url-list", str(urls), "-epochs", "1", "-uniquegets", "-duration", "0",
                              "-numworkers", "4"], env=env)
    assert r.rc == 0, r
    get = r.summary("GET")
    assert get["count"] == 10 and get["errors"] == 0 and get["bytes"] == sum(20000 + i for i in range(10)), r


def test_s3_endpoint_over_tls(tcluster, ca, tmp_path):
    """-s3endpoint https://.../s3 (path style, SigV4): PUTs then verified GETs over TLS."""
    import boto3
    import botocore.config
    access, secret = tcluster.c.s3_keys()
    s3 = boto3.client("s3", endpoint_url=tcluster.url + "/s3", aws_access_key_id=access,
                      aws_secret_access_key=secret, region_name="us-east-1", verify=ca,
                      config=botocore.config.Config(s3={"addressing_style": "path"}))
    b = unique("ldtlss3")
    s3.create_bucket(Bucket=b)
    env = dict(os.environ, AWS_ACCESS_KEY_ID=access, AWS_SECRET_ACCESS_KEY=secret, AWS_DEFAULT_REGION="us-east-1")
    common = ["-s3endpoint", tcluster.url + "/s3", "-s3-use-path-style", "-cacert", ca, "-bucket", b,
              "-numworkers", "4"]
    try:
        r = run_loader(tmp_path, common + ["-pctput", "100", "-maxputs", "30", "-minsize", "1KiB", "-maxsize",
                                           "100KiB", "-verifyhash"], env=env)
        assert r.rc == 0 and r.summary("PUT")["count"] == 30, r
        r = run_loader(tmp_path, common + ["-epochs", "1", "-uniquegets", "-duration", "0", "-verifyhash"], env=env)
        assert r.rc == 0, r
        assert r.summary("GET")["count"] == 30 and r.summary("GET")["errors"] == 0, r
    finally:
        for k in s3.list_objects_v2(Bucket=b).get("Contents", []):
            s3.delete_object(Bucket=b, Key=k["Key"])
        s3.delete_bucket(Bucket=b)


def test_name_not_in_the_certificate_is_refused(tcluster, ca, bucket, tmp_path):
    """"127.1" resolves to 127.0.0.1 but is not a name the certificate lists (it names 127.0.0.1 as an IP address
    and localhost): the right CA does not make a wrong name pass."""
    port = urllib.parse.urlsplit(tcluster.url).port
    r = run_loader(tmp_path, ["-ip", "127.1", "-port", str(port), "-https", "-cacert", ca, "-bucket", bucket,
                              "-duration", "2s"])
    assert r.rc == 2, r
    assert "TLS handshake with 127.1:%d: certificate verify failed: hostname mismatch" % port in r.err, r


def test_ca_of_ft_state_dir_is_the_default(tcluster, ca, tapi, bucket, tmp_path):
    """Without -cacert and FT_CACERT, FT_STATE_DIR/tls/ca.pem (what ft-cluster start --tls writes) verifies the
    cluster; the token comes from the same directory."""
    state = tmp_path / "state"
    (state / "tls").mkdir(parents=True)
    (state / "tls" / "ca.pem").write_bytes(open(ca, "rb").read())
    (state / "token").write_text("")  # auth is off in this cluster
    tapi.put(bucket, "s", b"y" * 5000)
    env = dict(os.environ, FT_STATE_DIR=str(state))
    env.pop("FT_CACERT", None)
    env.pop("FT_TOKEN", None)
    r = run_loader(tmp_path, https_args(tcluster, None) + ["-bucket", bucket, "-epochs", "1", "-duration", "0"],
                   env=env)
    assert r.rc == 0 and r.summary("GET")["count"] == 1 and r.summary("GET")["bytes"] == 5000, r


def test_wrong_ca_is_a_certificate_error(tcluster, tapi, ca, wrong_ca, bucket, tmp_path):
    """A CA that did not sign the cluster's certificate: the listing at start (blocking client) fails with a
    setup error naming the host and the reason; GETs from a -filelist (the engine) fail each, exit 1; never a
    fallback to plain HTTP."""
    host = "%s:%d" % (urllib.parse.urlsplit(tcluster.url).hostname, urllib.parse.urlsplit(tcluster.url).port)
    tapi.put(bucket, "o", b"x" * 100)
    r = run_loader(tmp_path, https_args(tcluster, wrong_ca) + ["-bucket", bucket, "-duration", "2s"])
    assert r.rc == 2, r
    assert "TLS handshake with %s: certificate verify failed" % host in r.err, r

    names = tmp_path / "names.txt"
    names.write_text("o\n")
    r = run_loader(tmp_path, https_args(tcluster, wrong_ca) + [
        "-bucket", bucket, "-filelist", str(names), "-epochs", "1", "-duration", "0", "-numworkers", "1"])
    assert r.rc == 1, r
    assert r.summary("GET")["errors"] == 1 and r.summary("GET")["bytes"] == 0, r
    assert "TLS handshake with %s: certificate verify failed" % host in r.err, r
    assert "self-signed certificate" in r.err or "unable to get local issuer certificate" in r.err, r


def test_plain_http_to_the_tls_port_fails(tcluster, bucket, tmp_path):
    """Without -https the proxy's TLS port answers the plain request with a 400; the loader says so and stops."""
    u = urllib.parse.urlsplit(tcluster.url)
    r = run_loader(tmp_path, ["-ip", u.hostname, "-port", str(u.port), "-bucket", bucket, "-duration", "2s"])
    assert r.rc == 2, r
    assert "HTTP 400: This port speaks HTTPS" in r.err, r


def test_missing_ca_file_fails_at_start(tcluster, bucket, tmp_path):
    r = run_loader(tmp_path, https_args(tcluster, str(tmp_path / "none.pem")) + ["-bucket", bucket])
    assert r.rc == 2, r
    assert "cannot load the CA bundle %s" % (tmp_path / "none.pem") in r.err, r


def test_server_closing_during_the_handshake(tmp_path):
    """A port that accepts and closes at once: a setup error naming the host, at start (blocking client), and each
    request's error in the run (engine, -filelist), never a hang."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    port = srv.getsockname()[1]
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                c, _ = srv.accept()
            except OSError:
                return
            c.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        args = ["-ip", "127.0.0.1", "-port", str(port), "-https", "-bucket", "b", "-timeout", "10s"]
        # the close comes before or after the ClientHello arrived: an end of stream, or a reset
        why = re.compile(r"TLS (handshake )?with 127\.0\.0\.1:%d: (the server closed the connection|connection closed|"
                         r"Connection reset by peer)" % port)
        r = run_loader(tmp_path, args + ["-duration", "2s"])
        assert r.rc == 2, r
        assert why.search(r.err), r
        names = tmp_path / "names.txt"
        names.write_text("o\n")
        r = run_loader(tmp_path, args + ["-filelist", str(names), "-epochs", "1", "-duration", "0",
                                         "-numworkers", "1"])
        assert r.rc == 1 and r.summary("GET")["errors"] == 1, r
        assert why.search(r.err), r
    finally:
        stop.set()
        srv.shutdown(socket.SHUT_RDWR)  # wakes the accept
        srv.close()
        t.join(timeout=10)
