"""The HTTP helpers the live benchmarks share (propagation.py, waiters.py): one protocol call over a kept-alive
connection, an account signed up and in, and a percentile. Standard library only; each script imports it from its
own directory.
"""
import http.client, json, socket

PASSWORD = "correct horse battery"


def connect(port):
    """A kept-alive connection to a daemon on 127.0.0.1, Nagle off (single small requests, timed one by one)."""
    conn = http.client.HTTPConnection("127.0.0.1", port)
    conn.connect()
    conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return conn


def call(conn, method, path, body=None, token=None):
    """One request; returns the status and the decoded JSON body (None when empty)."""
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
    response = conn.getresponse()
    data = response.read()
    return response.status, (json.loads(data) if data else None)


def account(conn, username, device=None):
    """Signs `username` up (sign-up must be open) and in; returns the session token."""
    status, _ = call(conn, "POST", "/v1/accounts", {"username": username, "password": PASSWORD})
    assert status in (200, 201), status
    request = {"username": username, "password": PASSWORD}
    if device:
        request["deviceName"] = device
    status, session = call(conn, "POST", "/v1/sessions", request)
    assert status == 200, (status, session)
    return session["token"]


def percentile(values, p, digits=3):
    """The `p` quantile (0...1) of `values`, nearest rank, rounded."""
    values = sorted(values)
    return round(values[min(len(values) - 1, int(p * len(values)))], digits)
