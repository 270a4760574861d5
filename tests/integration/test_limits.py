# SPDX-License-Identifier: Apache-2.0
"""Both daemons raise their open-files soft limit to the hard limit at start (a shell's 1024 would cap client
connections and the target's open-file cache), and say so in their log."""
import os
import resource
import socket
import subprocess
import time

import pytest

from conftest import FT_BIN


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def nofile(pid):
    """(soft, hard) 'Max open files' of pid."""
    with open("/proc/%d/limits" % pid) as f:
        for line in f:
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return int(soft), int(hard)
    raise AssertionError("no Max open files line for pid %d" % pid)


@pytest.mark.parametrize("binary", ["ft-proxy", "ft-target"])
def test_open_files_soft_limit_raised_to_hard(binary, tmp_path):
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 1024:
        pytest.skip("the hard open-files limit here is %d: nothing to raise to" % hard)
    public, control, unused = free_ports(3)
    argv = [os.path.join(FT_BIN, binary), "--public_port", str(public), "--control_port", str(control),
            "--state_dir", str(tmp_path)]
    if binary == "ft-target":
        (tmp_path / "mp").mkdir()
        argv += ["--mountpath", str(tmp_path / "mp"), "--proxy_url", "http://127.0.0.1:%d" % unused]
    log = tmp_path / "log"
    with open(log, "w") as out:
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                             preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard)))
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and "open files limit raised" not in log.read_text():
            assert p.poll() is None, log.read_text()
            time.sleep(0.05)
        soft_now, hard_now = nofile(p.pid)
        assert (soft_now, hard_now) == (hard, hard), log.read_text()
        assert "open files limit raised from 1024 to %d" % hard in log.read_text()
    finally:
        p.terminate()
        p.wait(20)
