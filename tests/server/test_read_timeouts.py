"""``engramdb serve``'s read timeouts over real sockets: a connection that does not
deliver its request head in ``--header-timeout`` seconds is closed, a body that does not
arrive in ``--body-timeout`` seconds is answered 408 and its connection closed, a
trickle of bytes does not keep either open, and normal requests are answered meanwhile.
"""

from __future__ import annotations

import json
import select
import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from server_helpers import SAM_TOKEN, Server, start

TIMEOUT = 1.0  # both timeouts of the server under test, in seconds
MARGIN = 10.0  # generous: a loaded 2-core machine may be slow to run the timer


@pytest.fixture(scope="module")
def hurried(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server whose timeouts are both :data:`TIMEOUT`, set by the environment (the
    options are tested by ``build`` below)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ENGRAMDB_HEADER_TIMEOUT", str(TIMEOUT))
        patch.setenv("ENGRAMDB_BODY_TIMEOUT", str(TIMEOUT))
        running = start(tmp_path_factory.mktemp("timeouts"))
    yield running
    running.stop()


def connect(server: Server) -> socket.socket:
    url = urlsplit(server.url)
    return socket.create_connection((url.hostname or "", url.port or 80), timeout=5)


def head(length: int | None = None, chunked: bool = False) -> bytes:
    lines = [
        "POST /v1/memories HTTP/1.1",
        "Host: 127.0.0.1",
        f"Authorization: Bearer {SAM_TOKEN}",
        "Content-Type: application/json",
    ]
    lines += [f"Content-Length: {length}"] if length is not None else []
    lines += ["Transfer-Encoding: chunked"] if chunked else []
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


BODY = json.dumps({"text": "a memory sent slowly, if at all"}).encode()
STALLS = {
    "nothing at all": b"",
    "half a request line": b"POST /v1/mem",
    "headers without their blank line": head(len(BODY))[:-2],
    "headers and half the body": head(len(BODY)) + BODY[: len(BODY) // 2],
    "headers and half a chunk": head(chunked=True) + b"%x\r\n" % len(BODY) + BODY[:5],
}


def closed_within(sock: socket.socket, seconds: float) -> tuple[bool, bytes]:
    """Read until the server closes ``sock`` or ``seconds`` pass: (closed, what came)."""
    answer = b""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        if not select.select([sock], [], [], left)[0]:
            break
        try:
            data = sock.recv(65536)
        except ConnectionResetError:
            return True, answer
        if not data:
            return True, answer
        answer += data
    return False, answer


def test_stalled_requests_are_closed_within_the_read_timeouts(hurried: Server) -> None:
    """Eight connections each of five stalls (nothing sent, half a request line, headers
    without their end, headers and half a body, half a chunk) are all closed within the
    timeout (+ a generous margin); those with their head in are answered 408 first;
    a normal request on another connection is answered while they stall."""
    opened = time.monotonic()
    stalled = []
    for name, data in STALLS.items():
        for _ in range(8):
            sock = connect(hurried)
            sock.sendall(data)
            stalled.append((name, sock))
    with hurried.client(SAM_TOKEN) as sam:
        assert sam.post("/v1/memories", json={"text": "answered meanwhile"}).status_code == 201
    try:
        for name, sock in stalled:
            left = opened + TIMEOUT + MARGIN - time.monotonic()
            closed, answer = closed_within(sock, max(left, 0.1))
            assert closed, f"{name}: still open {time.monotonic() - opened:.1f} s after"
            if name.startswith("headers and"):
                assert answer.startswith(b"HTTP/1.1 408 "), (name, answer[:80])
                assert b'"request_timeout"' in answer and b"connection: close" in answer
            else:
                assert answer == b"", (name, answer[:80])
    finally:
        for _, sock in stalled:
            sock.close()
    with hurried.client(SAM_TOKEN) as sam:
        assert sam.get("/v1/status").status_code == 200


@pytest.mark.parametrize("part", ["head", "body"])
def test_a_request_trickled_a_byte_at_a_time_is_cut_off(hurried: Server, part: str) -> None:
    """A client that keeps sending, one byte every 0.1 s, is still cut off: the
    timeouts count the whole head or body, not the wait for each byte."""
    sock = connect(hurried)
    if part == "body":
        data = BODY * 1000
        sock.sendall(head(len(data)))
    else:
        data = b"GET /v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 10_000
    started = time.monotonic()
    answer = b""
    try:
        for byte in data:
            assert time.monotonic() - started < TIMEOUT + MARGIN, "the server kept waiting"
            try:
                sock.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                break
            closed, came = closed_within(sock, 0.1)
            answer += came
            if closed:
                break
    finally:
        sock.close()
    elapsed = time.monotonic() - started
    assert TIMEOUT * 0.9 <= elapsed < TIMEOUT + MARGIN
    if part == "body":
        assert answer.startswith(b"HTTP/1.1 408 ")


def test_a_bad_timeout_is_refused_in_one_line() -> None:
    """A timeout that is not a number of seconds above 0 (and at most an hour) stops
    the server with one ConfigurationError naming the option or variable."""
    from engramdb import ConfigurationError
    from engramdb.server import build

    env = {"ENGRAMDB_TOKENS": json.dumps({SAM_TOKEN: ["acme"]}), "ENGRAMDB_DB": ":memory:"}
    for argv, variables, named in (
        (["--header-timeout", "soon"], {}, "--header-timeout='soon'"),
        (["--body-timeout", "0"], {}, "--body-timeout='0'"),
        ([], {"ENGRAMDB_BODY_TIMEOUT": "nan"}, "ENGRAMDB_BODY_TIMEOUT='nan'"),
        ([], {"ENGRAMDB_HEADER_TIMEOUT": "1e9"}, "ENGRAMDB_HEADER_TIMEOUT='1e9'"),
    ):
        with pytest.raises(ConfigurationError, match="is not a timeout") as caught:
            build(argv, {**env, **variables})
        assert str(caught.value).startswith(named)
    app, options, _ = build(["--body-timeout", "2.5"], {**env, "ENGRAMDB_HEADER_TIMEOUT": "4"})
    assert (options.header_timeout, options.body_timeout, app.body_timeout) == (4.0, 2.5, 2.5)
