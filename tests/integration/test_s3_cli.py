# SPDX-License-Identifier: Apache-2.0
# S3 API with stock command-line clients against a real local cluster: aws CLI, s3cmd, rclone, curl --aws-sigv4.
import filecmp
import hashlib
import os
import subprocess

import pytest

import s3util

AWS = "/usr/bin/aws"  # Debian's awscli; another `aws` may come first on PATH
CLI_TIMEOUT = 120


def run(argv, env, cwd=None, check=True):
    p = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, timeout=CLI_TIMEOUT)
    if check and p.returncode != 0:
        raise AssertionError("%s exited %d\nstdout:\n%s\nstderr:\n%s"
                             % (" ".join(argv), p.returncode, p.stdout.decode(errors="replace")[-3000:],
                                p.stderr.decode(errors="replace")[-3000:]))
    return p


def make_tree(root, spec):
    """spec: {relative path: size}; files of random bytes."""
    for rel, size in spec.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(os.urandom(size))


def tree_files(root):
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = hashlib.md5(fh.read()).hexdigest()
    return out


TREE = {"a.bin": 1000, "b.txt": 0, "dir/c.bin": 70000, "dir/sub/d.bin": 123457, "dir/sub/e e+.bin": 10,
        "x/y/z/deep.bin": 4096}


# ---- aws CLI ----

@pytest.fixture
def aws_env(cluster, tmp_path):
    return s3util.aws_cli_env(cluster, tmp_path)


def aws(cluster, env, *args, check=True):
    return run([s3util.require_tool(AWS), "--endpoint-url", s3util.endpoint(cluster)] + list(args), env,
               check=check)


def test_aws_cli(cluster, aws_env, tmp_path):
    b = s3util.bucket_name("awscli")
    src, dst = tmp_path / "src", tmp_path / "dst"
    make_tree(str(src), TREE)
    aws(cluster, aws_env, "s3", "mb", "s3://" + b)
    try:
        assert b in aws(cluster, aws_env, "s3", "ls").stdout.decode()
        # cp of single files, both ways
        aws(cluster, aws_env, "s3", "cp", "--no-progress", str(src / "a.bin"), "s3://%s/single/a.bin" % b)
        aws(cluster, aws_env, "s3", "cp", "--no-progress", "s3://%s/single/a.bin" % b, str(tmp_path / "a.out"))
        assert filecmp.cmp(str(src / "a.bin"), str(tmp_path / "a.out"), shallow=False)
        # sync up, then a second sync has nothing to do
        out = aws(cluster, aws_env, "s3", "sync", "--no-progress", str(src), "s3://%s/tree" % b).stdout.decode()
        assert out.count("upload:") == len(TREE), out
        out = aws(cluster, aws_env, "s3", "sync", "--no-progress", str(src), "s3://%s/tree" % b).stdout.decode()
        assert "upload:" not in out, out
        # ls: directory view and recursive
        top = aws(cluster, aws_env, "s3", "ls", "s3://%s/tree/" % b).stdout.decode()
        assert "PRE dir/" in top and "PRE x/" in top and "a.bin" in top and "c.bin" not in top
        rec = aws(cluster, aws_env, "s3", "ls", "--recursive", "s3://%s/tree/" % b).stdout.decode()
        for rel, size in TREE.items():
            assert ("%d tree/%s" % (size, rel)) in " ".join(rec.split()), (rel, rec)
        # sync down and compare every byte
        aws(cluster, aws_env, "s3", "sync", "--no-progress", "s3://%s/tree" % b, str(dst))
        assert tree_files(str(dst)) == tree_files(str(src))
        # s3api calls
        head = aws(cluster, aws_env, "s3api", "head-object", "--bucket", b, "--key", "tree/dir/c.bin").stdout.decode()
        assert '"ContentLength": 70000' in head
        assert hashlib.md5(open(src / "dir/c.bin", "rb").read()).hexdigest() in head
        aws(cluster, aws_env, "s3api", "put-object", "--bucket", b, "--key", "api/obj", "--body", str(src / "a.bin"))
        aws(cluster, aws_env, "s3api", "get-object", "--bucket", b, "--key", "api/obj", "--range", "bytes=0-99",
            str(tmp_path / "range.out"))
        assert open(tmp_path / "range.out", "rb").read() == open(src / "a.bin", "rb").read()[:100]
        aws(cluster, aws_env, "s3api", "copy-object", "--bucket", b, "--key", "api/copy",
            "--copy-source", "%s/api/obj" % b)
        lst = aws(cluster, aws_env, "s3api", "list-objects-v2", "--bucket", b, "--prefix", "api/",
                  "--delimiter", "/").stdout.decode()
        assert '"Key": "api/copy"' in lst and '"Key": "api/obj"' in lst
        loc = aws(cluster, aws_env, "s3api", "get-bucket-location", "--bucket", b).stdout.decode()
        assert "LocationConstraint" in loc
        err = aws(cluster, aws_env, "s3api", "get-object", "--bucket", b, "--key", "none", str(tmp_path / "n"),
                  check=False)
        assert err.returncode != 0 and b"NoSuchKey" in err.stderr
        aws(cluster, aws_env, "s3api", "delete-object", "--bucket", b, "--key", "api/copy")
        # rb of a non-empty bucket fails with BucketNotEmpty
        err = aws(cluster, aws_env, "s3", "rb", "s3://" + b, check=False)
        assert err.returncode != 0 and b"BucketNotEmpty" in err.stderr
        # rm --recursive removes everything under the prefix, then the rest
        out = aws(cluster, aws_env, "s3", "rm", "--recursive", "s3://%s/tree/" % b).stdout.decode()
        assert out.count("delete:") == len(TREE)
        assert aws(cluster, aws_env, "s3", "ls", "--recursive", "s3://%s/tree/" % b, check=False).stdout == b""
        aws(cluster, aws_env, "s3", "rm", "--recursive", "s3://%s" % b)
        aws(cluster, aws_env, "s3", "rb", "s3://" + b)
        assert b not in aws(cluster, aws_env, "s3", "ls").stdout.decode()
        b = None
    finally:
        if b:
            aws(cluster, aws_env, "s3", "rb", "--force", "s3://" + b, check=False)


def test_aws_cli_wrong_secret(cluster, aws_env):
    env = dict(aws_env, AWS_SECRET_ACCESS_KEY="wrong-secret")
    p = aws(cluster, env, "s3", "ls", check=False)
    assert p.returncode != 0 and b"SignatureDoesNotMatch" in p.stderr


# ---- s3cmd (no path prefix in its endpoint: the S3 API served at / by a cluster of its own) ----

@pytest.fixture(scope="module")
def root_cluster(tmp_path_factory):
    import conftest
    if conftest.EXTERNAL_URL:
        pytest.skip("FT_CLUSTER_URL is set: s3cmd needs a proxy started with --s3_root true")
    h = conftest.start_cluster(tmp_path_factory.mktemp("s3root"), targets=3, mountpaths=1,
                               proxy_args=["--s3_root", "true"])
    try:
        yield h
    finally:
        problems = conftest.stop_cluster(h)
        if problems:
            pytest.fail("\n\n".join(problems), pytrace=False)


def s3cmd(cfg, env, *args, check=True):
    return run([s3util.require_tool("s3cmd"), "-c", str(cfg)] + list(args), env, check=check)


def test_s3cmd(root_cluster, tmp_path):
    ak, sk = s3util.keys(root_cluster)
    hostport = root_cluster.url.split("://", 1)[1]
    cfg = tmp_path / "s3cfg"
    cfg.write_text("[default]\naccess_key = %s\nsecret_key = %s\nhost_base = %s\nhost_bucket = %s\n"
                   "use_https = False\nsignature_v2 = False\nbucket_location = us-east-1\ncheck_md5 = True\n"
                   % (ak, sk, hostport, hostport))
    env = s3util.clean_env(home=tmp_path)
    b = s3util.bucket_name("s3cmd")
    src = tmp_path / "src"
    make_tree(str(src), TREE)
    s3cmd(cfg, env, "mb", "s3://" + b)
    s3cmd(cfg, env, "put", str(src / "dir/c.bin"), "s3://%s/one/c.bin" % b)
    ls = s3cmd(cfg, env, "ls", "s3://%s/" % b).stdout.decode()
    assert "DIR" in ls and "s3://%s/one/" % b in ls
    ls = s3cmd(cfg, env, "ls", "-r", "s3://%s" % b).stdout.decode()
    assert "70000" in ls and "s3://%s/one/c.bin" % b in ls
    s3cmd(cfg, env, "get", "s3://%s/one/c.bin" % b, str(tmp_path / "c.out"))
    assert filecmp.cmp(str(src / "dir/c.bin"), str(tmp_path / "c.out"), shallow=False)
    info = s3cmd(cfg, env, "info", "s3://%s/one/c.bin" % b).stdout.decode()
    assert hashlib.md5(open(src / "dir/c.bin", "rb").read()).hexdigest() in info  # the ETag is the MD5
    # sync with md5 checks: a second run transfers nothing
    s3cmd(cfg, env, "sync", str(src) + "/", "s3://%s/tree/" % b)
    out = s3cmd(cfg, env, "sync", "--check-md5", str(src) + "/", "s3://%s/tree/" % b).stdout.decode()
    assert "upload:" not in out, out
    s3cmd(cfg, env, "sync", "s3://%s/tree/" % b, str(tmp_path / "down") + "/")
    assert tree_files(str(tmp_path / "down")) == tree_files(str(src))
    s3cmd(cfg, env, "del", "s3://%s/one/c.bin" % b)
    s3cmd(cfg, env, "del", "--recursive", "--force", "s3://%s/tree/" % b)
    assert s3cmd(cfg, env, "ls", "-r", "s3://%s" % b).stdout.strip() == b""
    s3cmd(cfg, env, "rb", "s3://" + b)


# ---- rclone ----

def rclone(cluster, *args, check=True):
    ak, sk = s3util.keys(cluster)
    env = s3util.clean_env({
        "RCLONE_CONFIG_FT_TYPE": "s3", "RCLONE_CONFIG_FT_PROVIDER": "Other",
        "RCLONE_CONFIG_FT_ENDPOINT": s3util.endpoint(cluster), "RCLONE_CONFIG_FT_REGION": "us-east-1",
        "RCLONE_CONFIG_FT_ACCESS_KEY_ID": ak, "RCLONE_CONFIG_FT_SECRET_ACCESS_KEY": sk,
        "RCLONE_CONFIG_FT_FORCE_PATH_STYLE": "true"})
    return run([s3util.require_tool("rclone"), "--config", "/dev/null"] + list(args), env, check=check)


def test_rclone_copy_and_check(cluster, tmp_path):
    b = s3util.bucket_name("rclone")
    src = tmp_path / "src"
    make_tree(str(src), TREE)
    rclone(cluster, "mkdir", "ft:" + b)
    rclone(cluster, "mkdir", "ft:" + b)  # again: BucketAlreadyOwnedByYou is success for rclone
    rclone(cluster, "copy", str(src), "ft:%s/data" % b)
    out = rclone(cluster, "check", str(src), "ft:%s/data" % b).stderr.decode()
    assert "0 differences found" in out and "%d matching files" % len(TREE) in out, out
    assert "hashes could not be checked" not in out, out  # the ETags are MD5s
    # a changed file is found by check (by hash: same size)
    with open(src / "a.bin", "r+b") as f:
        first = f.read(1)[0]
        f.seek(0)  # the read moved the offset: the byte changed is the one read
        f.write(bytes([first ^ 0xFF]))
    p = rclone(cluster, "check", str(src), "ft:%s/data" % b, check=False)
    assert p.returncode != 0 and b"1 differences found" in p.stderr, p.stderr
    rclone(cluster, "copy", str(src), "ft:%s/data" % b)
    rclone(cluster, "check", str(src), "ft:%s/data" % b)
    rclone(cluster, "copy", "ft:%s/data" % b, str(tmp_path / "down"))
    assert tree_files(str(tmp_path / "down")) == tree_files(str(src))
    listed = rclone(cluster, "lsf", "-R", "ft:%s/data" % b).stdout.decode().split()
    assert "dir/sub/" in listed and "x/y/z/deep.bin" in listed
    rclone(cluster, "purge", "ft:" + b)


# ---- curl --aws-sigv4 ----

def curl(cluster, *args, user=None, check=True):
    ak, sk = s3util.keys(cluster)
    argv = [s3util.require_tool("curl"), "-sS", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user", user or "%s:%s" % (ak, sk),
            "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-w", "\n%{http_code}"] + list(args)
    p = run(argv, s3util.clean_env(), check=check)
    body, _, status = p.stdout.rpartition(b"\n")
    return int(status), body


def test_curl_aws_sigv4(cluster, tmp_path):
    b = s3util.bucket_name("curl")
    base = s3util.endpoint(cluster)
    data = os.urandom(5000)
    (tmp_path / "f").write_bytes(data)
    assert curl(cluster, "-X", "PUT", "%s/%s" % (base, b))[0] == 200
    assert curl(cluster, "-T", str(tmp_path / "f"), "%s/%s/p/f.bin" % (base, b))[0] == 200
    status, body = curl(cluster, "%s/%s/p/f.bin" % (base, b))
    assert status == 200 and body == data
    status, body = curl(cluster, "-H", "Range: bytes=100-199", "%s/%s/p/f.bin" % (base, b))
    assert status == 206 and body == data[100:200]
    # curl signs the query exactly as written: keep it sorted
    status, body = curl(cluster, "%s/%s?list-type=2&max-keys=5&prefix=p" % (base, b))
    assert status == 200 and b"<Key>p/f.bin</Key>" in body and b"<KeyCount>1</KeyCount>" in body
    status, body = curl(cluster, "%s/%s?delimiter=%%2F&list-type=2" % (base, b))
    assert status == 200 and b"<Prefix>p/</Prefix>" in body
    status, body = curl(cluster, "-I", "%s/%s/p/f.bin" % (base, b))
    assert status == 200 and b"Content-Length: 5000" in body
    status, body = curl(cluster, "%s/%s/p/f.bin" % (base, b), user="%s:wrong" % s3util.keys(cluster)[0])
    assert status == 403 and b"SignatureDoesNotMatch" in body
    assert curl(cluster, "-X", "DELETE", "%s/%s/p/f.bin" % (base, b))[0] == 204
    assert curl(cluster, "-X", "DELETE", "%s/%s" % (base, b))[0] == 204
