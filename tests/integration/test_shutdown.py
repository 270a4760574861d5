# SPDX-License-Identifier: Apache-2.0
# A node stopped with SIGTERM lets the control-port requests under way finish before it exits.
import signal
import socket
import threading
import time
import urllib.parse


def slow_post(url, path, body, first, pause_s, result):
    """POSTs body to url+path: the first `first` bytes, a pause, then the rest; result gets the answer's
    status line (b"" when the connection ended without one) or the exception."""
    u = urllib.parse.urlsplit(url)
    try:
        s = socket.create_connection((u.hostname, u.port), timeout=20)
        s.sendall(b"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % (path.encode(), u.netloc.encode(), len(body)))
        s.sendall(body[:first])
        time.sleep(pause_s)
        s.sendall(body[first:])
        got = b""
        while b"\r\n" not in got:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
        result.append(got.split(b"\r\n", 1)[0])
        s.close()
    except OSError as e:
        result.append(e)


def test_sigterm_lets_a_control_request_under_way_finish(make_cluster):
    # A request whose body is still arriving when the target gets SIGTERM is answered (a metasync
    # without documents: 200; 401 with a cluster secret), not cut by the stop; the target then exits.
    # On a stop that closed every connection at once the client saw the connection end.
    h = make_cluster(targets=2)
    t = h.c.targets[1]
    body = b'{"pad": "' + b"x" * 200000 + b'"}'
    result = []
    th = threading.Thread(target=slow_post, args=(t.control_url, "/v1/metasync", body, 1000, 1.5, result))
    th.start()
    time.sleep(0.5)  # the head and the first bytes are in: the request is under way
    t0 = time.monotonic()
    t.expected_dead = True
    t.signal(signal.SIGTERM)
    th.join(30)
    assert result and not isinstance(result[0], Exception), result
    assert result[0].startswith(b"HTTP/1.1 "), "the connection ended without an answer: %r" % result
    assert result[0].split(b" ")[1] in (b"200", b"401"), result
    assert t.wait_dead(10), "the target did not exit after the request was answered"
    assert time.monotonic() - t0 < 8
