# SPDX-License-Identifier: LGPL-2.1-or-later
"""HTTP to pwb-objd on its Unix socket, for the objd-*.py tests."""
import http.client
import socket


class UnixHTTP(http.client.HTTPConnection):
    """One connection to the daemon listening on @path."""

    def __init__(self, path, timeout):
        super().__init__("objd", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def request(path, method, url, body=None, headers=None, timeout=60):
    """One request on a connection of its own: (status, body, response)."""
    c = UnixHTTP(path, timeout)
    try:
        c.request(method, url, body=body, headers=headers or {})
        r = c.getresponse()
        return r.status, r.read(), r
    finally:
        c.close()
