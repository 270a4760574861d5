# SPDX-License-Identifier: Apache-2.0
# The ft command-line client against a real cluster: outputs, exit codes, settings, transfers, jobs, the progress bar.
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import peers
from ftutil import Api, unique, wait_until
from test_coldget import put_origin
from test_download import Flaky
from test_dsort import make_tar

FT = os.path.join(os.environ.get("FT_BIN", os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin")), "ft")
origin = peers.nginx_origin_fixture()


def ft(cluster, *args, env=None, home=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("FT_")}
    e["HOME"] = home or "/nonexistent"
    if cluster is not None:
        e["FT_ENDPOINT"] = cluster.url
    e.update(env or {})
    p = subprocess.run([FT, *args], env=e, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


@pytest.mark.parametrize("cmd", [[], ["bucket"], ["bucket", "ls"], ["bucket", "create"], ["bucket", "rm"],
                                 ["bucket", "props"], ["object"], ["object", "ls"], ["object", "put"],
                                 ["object", "get"], ["object", "rm"], ["object", "cat"], ["object", "get-batch"],
                                 ["job"], ["job", "start"],
                                 ["job", "ls"], ["job", "show"], ["job", "wait"], ["job", "stop"], ["cluster"],
                                 ["cluster", "show"]])
def test_help_everywhere(cmd):
    rc, out, err = ft(None, *cmd, "--help")
    assert rc == 0 and out.startswith("Usage: ft"), (cmd, out, err)
    if cmd:
        assert " ".join(cmd) in out


def test_usage_errors():
    assert ft(None)[0] == 2
    rc, _, err = ft(None, "bogus")
    assert rc == 2 and "unknown command" in err
    assert ft(None, "bucket")[0] == 2
    assert ft(None, "bucket", "create")[0] == 2
    assert ft(None, "bucket", "create", "x://y")[0] == 2
    assert ft(None, "object", "ls", "b", "--limit", "abc")[0] == 2
    assert ft(None, "job", "start", "copy", "onlyone")[0] == 2
    assert ft(None, "job", "start", "prefetch", "s3://b")[0] == 2  # no names
    rc, _, err = ft(None, "object", "put", "--endpoint")
    assert rc == 2 and "needs a value" in err


def test_cannot_connect_is_3():
    rc, _, err = ft(None, "bucket", "ls", env={"FT_ENDPOINT": "http://127.0.0.1:1"})
    assert rc == 3 and "cannot reach" in err


def test_messages_hide_url_credentials():
    """An endpoint with user:password@ or a signed query, a mistyped option with a value: the messages leave them out."""
    for endpoint in ("http://u:S3CRET@127.0.0.1:1", "http://127.0.0.1:1/p?sig=S3CRET"):
        rc, out, err = ft(None, "bucket", "ls", env={"FT_ENDPOINT": endpoint})
        assert rc == 3 and "cannot reach the cluster at http://127.0.0.1:1" in err, err
        assert "S3CRET" not in out + err, err
    rc, out, err = ft(None, "bucket", "ls", "--=S3CRET")
    assert rc == 2 and "bad option" in err and "S3CRET" not in err, err


def test_settings_flag_env_config_and_token(cluster, tmp_path):
    seen = []

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            seen.append(self.headers.get("Authorization"))
            body = b"[]"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    fake = "http://127.0.0.1:%d" % srv.server_address[1]
    try:
        # config file
        cfg = tmp_path / ".config" / "ft"
        cfg.mkdir(parents=True)
        (cfg / "config.json").write_text(json.dumps({"endpoint": fake, "token": "from-config"}))
        assert ft(None, "bucket", "ls", home=str(tmp_path))[0] == 0
        assert seen[-1] == "Bearer from-config"
        # the environment wins over the file, the flag over both
        assert ft(None, "bucket", "ls", home=str(tmp_path), env={"FT_TOKEN": "from-env"})[0] == 0
        assert seen[-1] == "Bearer from-env"
        assert ft(None, "bucket", "ls", "--token", "from-flag", home=str(tmp_path), env={"FT_TOKEN": "x"})[0] == 0
        assert seen[-1] == "Bearer from-flag"
        rc, out, _ = ft(None, "bucket", "ls", "--endpoint", cluster.url, home=str(tmp_path))
        assert rc == 0 and out.startswith("NAME")
        assert len(seen) == 3
        # no token anywhere: no header
        assert ft(None, "bucket", "ls", "--endpoint", fake)[0] == 0
        assert seen[-1] is None
    finally:
        srv.shutdown()
        srv.server_close()


def test_bucket_commands(cluster):
    b = unique("clib")
    rc, out, err = ft(cluster, "bucket", "create", b, "--checksum", "md5")
    assert rc == 0 and f"created ais://{b}" in out, err
    rc, _, err = ft(cluster, "bucket", "create", b)
    assert rc == 1 and "409" in err
    rc, out, _ = ft(cluster, "bucket", "ls")
    assert rc == 0 and out.splitlines()[0].split() == ["NAME", "PROVIDER", "CHECKSUM", "CREATED"]
    assert any(line.split()[:3] == [b, "ais", "md5"] for line in out.splitlines())
    rc, out, _ = ft(cluster, "bucket", "ls", "--json")
    assert rc == 0 and any(x["name"] == b for x in json.loads(out))
    rc, out, err = ft(cluster, "bucket", "props", b, "--set", "mirror.copies=2", "--json")
    assert rc == 0, err
    assert json.loads(out)["mirror"]["copies"] == 2
    rc, out, _ = ft(cluster, "bucket", "props", b)
    assert rc == 0 and "PROPERTY" in out and "checksum" in out
    assert ft(cluster, "bucket", "props", b, "--set", "nonsense")[0] == 2
    rc, _, err = ft(cluster, "bucket", "props", b, "--set", "mirror.copies=99")
    assert rc == 1 and "400" in err
    rc, out, err = ft(cluster, "bucket", "props", b, "--set", "checksum.type=xxh3", "--json")
    assert rc == 0 and json.loads(out)["checksum"] == "xxh3", err
    rc, out, err = ft(cluster, "bucket", "props", b, "--set", "checksum.type=sha512", "--json")
    assert rc == 0 and json.loads(out)["checksum"] == "sha512", err
    rc, _, err = ft(cluster, "bucket", "props", b, "--set", "checksum.type=sha1")
    assert rc == 1 and "400" in err and "crc32c" in err and "sha512" in err
    b512 = unique("clib512")
    rc, out, err = ft(cluster, "bucket", "create", b512, "--checksum", "sha512")
    assert rc == 0 and f"created ais://{b512}" in out, err
    rc, out, _ = ft(cluster, "bucket", "ls")
    assert any(line.split()[:3] == [b512, "ais", "sha512"] for line in out.splitlines())
    assert ft(cluster, "bucket", "rm", b512)[0] == 0
    assert ft(cluster, "bucket", "rm", b)[0] == 0
    rc, _, err = ft(cluster, "bucket", "rm", b)
    assert rc == 1 and "404" in err
    rc, _, err = ft(cluster, "bucket", "props", b)
    assert rc == 1 and "does not exist" in err


def tree(root):
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            out[os.path.relpath(p, root)] = open(p, "rb").read()
    return out


def test_object_commands_and_recursive_transfers(cluster, tmp_path):
    b = unique("clio")
    assert ft(cluster, "bucket", "create", b)[0] == 0
    src = tmp_path / "src"
    for i in range(30):
        p = src / f"d{i % 3}" / f"sub{i % 2}" / f"f{i:02d}.bin"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(os.urandom(1000 + 301 * i))
    rc, out, err = ft(cluster, "object", "put", str(src), f"{b}/up", "-r", "--workers", "4")
    assert rc == 0, err
    assert "put: 30 objects" in out and "0 errors" in out
    assert "put: 30/30 objects" in err  # not a terminal: plain progress lines
    rc, out, _ = ft(cluster, "object", "ls", b, "--prefix", "up/d1/")
    assert rc == 0 and out.splitlines()[0].split() == ["NAME", "SIZE", "VERSION"]
    assert len(out.splitlines()) == 1 + 10
    rc, out, _ = ft(cluster, "object", "ls", b, "--json", "--limit", "5")
    assert rc == 0 and len(json.loads(out)) == 5
    dst = tmp_path / "dst"
    rc, out, err = ft(cluster, "object", "get", b, str(dst), "-r", "--prefix", "up/")
    assert rc == 0 and "get: 30 objects" in out, err
    assert tree(dst / "up") == tree(src)
    # one file, named by its base name; cat; get to a file and to stdout
    one = tmp_path / "one.txt"
    one.write_bytes(b"hello ft\n")
    assert ft(cluster, "object", "put", str(one), b)[0] == 0
    rc, out, _ = ft(cluster, "object", "cat", f"{b}/one.txt")
    assert rc == 0 and out == "hello ft\n"
    rc, out, _ = ft(cluster, "object", "get", f"{b}/one.txt", "-")
    assert rc == 0 and out == "hello ft\n"
    got = tmp_path / "got.txt"
    assert ft(cluster, "object", "get", f"{b}/one.txt", str(got))[0] == 0
    assert got.read_bytes() == b"hello ft\n"
    rc, _, err = ft(cluster, "object", "cat", f"{b}/nothing")
    assert rc == 1 and "404" in err
    rc, _, err = ft(cluster, "object", "get", f"{b}/nothing", str(tmp_path / "n"))
    assert rc == 1 and not (tmp_path / "n").exists() and not (tmp_path / "n.ft-part").exists()
    assert ft(cluster, "object", "put", str(src), b)[0] == 2  # a directory needs -r
    assert ft(cluster, "object", "rm", f"{b}/one.txt")[0] == 0
    rc, _, err = ft(cluster, "object", "rm", f"{b}/one.txt")
    assert rc == 1 and "404" in err
    assert ft(cluster, "object", "cat", b)[0] == 2  # no object name
    assert ft(cluster, "bucket", "rm", b)[0] == 0


def untar(data):
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as t:
        return [(m.name, t.extractfile(m).read()) for m in t.getmembers()]


def test_object_get_batch(cluster, tmp_path):
    """Objects of two buckets as one TAR in the order given, to a file (only when whole) or stdout; a shard
    member and a range through --spec; missing objects fail the batch or, with --continue-on-error, are
    empty __404__ members."""
    b, o = unique("clib"), unique("clib2")
    for bucket in (b, o):
        assert ft(cluster, "bucket", "create", bucket)[0] == 0
    api = Api(cluster.url)
    objs = {f"{b}/s/{i:02d}": os.urandom(16384 + i) for i in range(24)}
    objs[f"{o}/other"] = b"in the other bucket"
    for key, data in objs.items():
        bucket, name = key.split("/", 1)
        api.put(bucket, name, data)
    api.put(b, "sh.tar", make_tar([("a.txt", b"alpha"), ("b/c.cls", b"7")]))
    order = [f"{o}/other"] + [k for k in objs if k.startswith(b)][::-1]
    out = tmp_path / "batch.tar"
    rc, text, err = ft(cluster, "object", "get-batch", *order, "-o", str(out))
    assert rc == 0 and f"get-batch: {len(order)} items" in text, err
    assert untar(out.read_bytes()) == [(k, objs[k]) for k in order]
    p = subprocess.run([FT, "object", "get-batch", f"{o}/other", f"{b}/s/03", "--only-objname"],
                       env={"HOME": "/nonexistent", "FT_ENDPOINT": cluster.url}, capture_output=True, timeout=120)
    assert p.returncode == 0 and untar(p.stdout) == [("other", objs[f"{o}/other"]), ("s/03", objs[f"{b}/s/03"])]
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"in": [{"bucket": b, "objname": "sh.tar", "archpath": "b/c.cls"},
                                       {"bucket": b, "objname": "s/05", "start": 100, "length": 7},
                                       {"bucket": b, "objname": "nope"}]}))
    rc, _, err = ft(cluster, "object", "get-batch", "--spec", str(spec), "-o", str(out), "--continue-on-error")
    assert rc == 0, err
    assert untar(out.read_bytes()) == [(f"{b}/sh.tar/b/c.cls", b"7"), (f"{b}/s/05", objs[f"{b}/s/05"][100:107]),
                                       (f"__404__/{b}/nope", b"")]
    # missing: before the stream starts (a clean 404), and after 24 items of 16 KiB were sent (a cut stream)
    for names, word in (([f"{b}/nope", f"{b}/s/00"], "404"), (order + [f"{b}/nope"], "cut short")):
        cut = tmp_path / "cut.tar"
        rc, _, err = ft(cluster, "object", "get-batch", *names, "-o", str(cut))
        assert rc == 1 and word in err and not cut.exists() and not (tmp_path / "cut.tar.ft-part").exists(), err
    # usage
    assert ft(cluster, "object", "get-batch", "-o", str(out))[0] == 2  # nothing to get
    assert ft(cluster, "object", "get-batch", f"{b}/s/00", "--spec", str(spec), "-o", str(out))[0] == 2
    assert ft(cluster, "object", "get-batch", b, "-o", str(out))[0] == 2  # a bucket, no object
    spec.write_text("{\"in\": []}")
    rc, _, err = ft(cluster, "object", "get-batch", "--spec", str(spec), "-o", str(out))
    assert rc == 2 and "expected" in err
    for bucket in (b, o):
        assert ft(cluster, "bucket", "rm", bucket)[0] == 0


def test_jobs_copy_download_prefetch(cluster, origin, tmp_path):
    b = unique("clij")
    assert ft(cluster, "bucket", "create", b)[0] == 0
    for i in range(6):
        (tmp_path / f"o{i}").write_bytes(os.urandom(2000))
    assert ft(cluster, "object", "put", str(tmp_path), b, "-r")[0] == 0
    c = unique("clic")
    rc, out, err = ft(cluster, "job", "start", "copy", b, c, "--wait")
    assert rc == 0, err
    assert out.startswith("job j-") and "finished, 6 objects" in out
    jid = out.split()[1]
    rc, out, _ = ft(cluster, "job", "show", jid)
    assert rc == 0 and "KIND:     copy" in out and f"TO:       ais://{c}" in out and "TARGET" in out
    rc, out, _ = ft(cluster, "job", "show", jid, "--json")
    assert rc == 0 and json.loads(out)["objects"] == 6
    rc, out, _ = ft(cluster, "job", "ls")
    assert rc == 0 and out.splitlines()[0].split()[:4] == ["ID", "KIND", "BUCKET", "STATE"]
    assert any(line.startswith(jid) and "finished" in line for line in out.splitlines())
    rc, out, _ = ft(cluster, "job", "start", "copy", b, c, "--dry-run", "--json")
    assert rc == 0 and json.loads(out)["job_id"].startswith("j-")
    # --prepend: each copy is named <prepend><name>
    rc, out, err = ft(cluster, "job", "start", "copy", b, c, "--prepend", "old/", "--wait")
    assert rc == 0 and "finished, 6 objects" in out, err
    rc, out, _ = ft(cluster, "job", "show", out.split()[1])
    assert rc == 0 and "PREPEND:  old/" in out, out
    api = Api(cluster.url)
    assert api.get(c, "old/o3").content == (tmp_path / "o3").read_bytes()
    assert {e["name"] for e in api.list_all(c)[0]} == {f"o{i}" for i in range(6)} | {f"old/o{i}" for i in range(6)}
    rc, _, err = ft(cluster, "job", "start", "copy", b, c, "--prepend", "p" * 1024)
    assert rc == 1 and "prepend" in err, err
    # --ext: a copy's extension replaced (o1 has none: only names with a dot change)
    api.put(b, "pic.jpg", b"jpeg bytes")
    rc, out, err = ft(cluster, "job", "start", "copy", b, c, "--objnames", "pic.jpg", "--ext", "jpg=png,cls=txt",
                      "--wait")
    assert rc == 0 and "finished, 1 objects" in out, err
    rc, out, _ = ft(cluster, "job", "show", out.split()[1])
    assert rc == 0 and "EXT:      " in out and "jpg->png" in out and "cls->txt" in out, out
    assert api.get(c, "pic.png").content == b"jpeg bytes"
    for bad in ("jpg", "jpg=", "=png", "jpg=png,,"):
        rc, _, err = ft(cluster, "job", "start", "copy", b, c, "--ext", bad)
        assert rc == 2 and "--ext" in err, (bad, err)
    rc, _, err = ft(cluster, "job", "start", "copy", b, c, "--ext", "jpg=p/ng")
    assert rc == 1 and "without dots or slashes" in err, err
    rc, _, err = ft(cluster, "job", "start", "copy", b, c, "--etl-timeout", "0")
    assert rc == 2 and "--etl-timeout" in err, err
    # download from the nginx origin
    names = [f"{b}-dl-{i}.bin" for i in range(4)]
    for n in names:
        put_origin(origin, n, n.encode() * 100)
    rc, out, err = ft(cluster, "job", "start", "download", c, *[f"{origin.url}/{n}" for n in names], "--wait")
    assert rc == 0 and "finished, 4 objects" in out, err
    rc, out, _ = ft(cluster, "object", "cat", f"{c}/{names[2]}")
    assert out == names[2] * 100
    # a job with failed objects: exit 1
    rc, out, _ = ft(cluster, "job", "start", "download", c, f"{origin.url}/{b}-missing.bin", "--wait")
    assert rc == 1 and "1 errors" in out
    # prefetch of a remote bucket
    r = unique("clir")
    assert ft(cluster, "bucket", "create", f"ht://{r}", "--backend", json.dumps({"endpoint": origin.url}))[0] == 0
    rc, out, err = ft(cluster, "job", "start", "prefetch", f"ht://{r}", "--objnames", ",".join(names), "--wait")
    assert rc == 0 and "finished, 4 objects" in out, err
    rc, _, err = ft(cluster, "job", "show", "j-nosuch")
    assert rc == 1 and "404" in err
    assert ft(cluster, "job", "stop", jid)[0] == 0
    # a rebalance now (PUT /v1/cluster, answered with the id as text), followed to its end
    rc, out, err = ft(cluster, "job", "start", "rebalance", "--wait")
    assert rc == 0 and re.match(r"job j-[0-9a-f]+-[0-9a-f]+\n", out) and "finished" in out, (out, err)
    rc, out, _ = ft(cluster, "job", "start", "rebalance", "--json")
    assert rc == 0 and json.loads(out)["job_id"].startswith("j-"), out
    assert ft(cluster, "job", "start", "rebalance", "extra")[0] == 2
    for x in (b, c):
        ft(cluster, "bucket", "rm", x)
    ft(cluster, "bucket", "rm", f"ht://{r}")


def test_cluster_show(cluster):
    rc, out, _ = ft(cluster, "cluster", "show")
    assert rc == 0 and "3 targets" in out
    rows = [line for line in out.splitlines() if " target " in f" {line} "]
    assert len(rows) == 3 and all("online" in line for line in rows), out
    rc, out, _ = ft(cluster, "cluster", "show", "--json")
    doc = json.loads(out)
    assert sum(1 for n in doc["nodes"] if n["role"] == "target") == 3
    assert all(len(n["mountpaths"]) == 2 for n in doc["nodes"] if n["role"] == "target")


def test_cluster_show_mountpaths_with_auth(make_cluster):
    # a signed control plane: the mountpaths come through the proxy's relay, not the targets' control ports
    h = make_cluster(targets=2, mountpaths=2, auth=True)
    rc, out, err = ft(h, "cluster", "show", "--json", env={"FT_TOKEN": h.token})
    assert rc == 0, err
    doc = json.loads(out)
    assert [len(n.get("mountpaths", [])) for n in doc["nodes"] if n["role"] == "target"] == [2, 2], doc


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_progress_bar_on_a_terminal(cluster, tmp_path):
    flaky = Flaky()
    flaky.delay = 0.25
    b = unique("clit")
    sock = str(tmp_path / "tmux.sock")
    try:
        assert ft(cluster, "bucket", "create", b)[0] == 0
        subprocess.run(["tmux", "-S", sock, "new-session", "-d", "-x", "160", "-y", "20", "-s", "ft"], check=True)
        cmd = (f"FT_ENDPOINT={cluster.url} {FT} job start download {b} --template '{flaky.url}/slow/p{{000..059}}'"
               " --wait; echo EXIT=$((40+$?))")
        subprocess.run(["tmux", "-S", sock, "send-keys", "-t", "ft", cmd, "Enter"], check=True)

        def pane():
            return subprocess.run(["tmux", "-S", sock, "capture-pane", "-p", "-t", "ft"], capture_output=True,
                                  text=True, check=True).stdout

        # while it runs: one bar redrawn in place, part filled, with counts, bytes, rate and ETA
        moving = re.compile(r"download running \[#+\.+\] +\d+% [1-9]\d*/60 objects .* ETA \d+")
        seen = wait_until(lambda: (lambda p: p if moving.search(p) else None)(pane()), 30, what="a progress bar")
        bar = [line for line in seen.splitlines() if "download running [" in line]
        assert len(bar) == 1, seen
        assert "/60 objects" in bar[0] and "/s" in bar[0] and "%" in bar[0], bar
        done = wait_until(lambda: (lambda p: p if "EXIT=4" in p else None)(pane()), 60, what="the job ends")
        assert "EXIT=40" in done, done  # exit code 0
        assert "download finished [########" in done and "100%" in done and "60/60 objects" in done, done
        assert "download running [" not in done  # redrawn over, not scrolled
    finally:
        subprocess.run(["tmux", "-S", sock, "kill-server"], capture_output=True)
        flaky.close()
        ft(cluster, "bucket", "rm", b)
