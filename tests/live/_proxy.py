"""A loopback TCP proxy that loses a connection during COMMIT, on purpose.

Armed, it forwards the next client packet holding ``COMMIT`` to the server, waits for the
server's answer (so the transaction has committed) and closes both sockets instead of passing
the answer on: the client sees exactly what a node killed or a network cut after the commit
shows it — a lost connection, with the outcome unknown to it. Works for MySQL/MariaDB and
PostgreSQL (plain-text protocols; PostgreSQL URLs get ``sslmode=disable``).
"""

from __future__ import annotations

import contextlib
import socket
import threading

import sqlalchemy as sa

#: How a bare COMMIT ends on the wire: MySQL's COM_QUERY (0x03) and PostgreSQL's Query message.
_COMMITS = (b"\x03COMMIT", b"COMMIT\x00")


class CommitCutter:
    """Listens on 127.0.0.1 and forwards to the server of ``server_url``."""

    def __init__(self, server_url: str) -> None:
        url = sa.make_url(server_url)
        self._upstream = (url.host or "127.0.0.1", url.port or _default_port(url))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._armed = threading.Event()
        self.cuts = 0
        self._lock = threading.Lock()
        self._closing = False
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, server_url: str) -> str:
        """``server_url`` pointing at the proxy."""
        url = sa.make_url(server_url).set(host="127.0.0.1", port=self.port)
        if url.get_backend_name() == "postgresql":
            url = url.update_query_dict({"sslmode": "disable"})
        return url.render_as_string(hide_password=False)

    def arm(self) -> None:
        """Cut the connection that sends the next COMMIT, after the server committed."""
        self._armed.set()

    def close(self) -> None:
        self._closing = True
        self._listener.close()

    # -- plumbing -------------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self._upstream)
            pair = _Pair(client, server)
            threading.Thread(target=self._client_to_server, args=(pair,), daemon=True).start()
            threading.Thread(target=self._server_to_client, args=(pair,), daemon=True).start()

    def _client_to_server(self, pair: _Pair) -> None:
        while True:
            data = _recv(pair.client)
            if not data:
                pair.close()
                return
            if self._armed.is_set() and data.endswith(_COMMITS):
                with self._lock:
                    if self._armed.is_set():
                        self._armed.clear()
                        pair.cutting = True
            try:
                pair.server.sendall(data)
            except OSError:
                pair.close()
                return

    def _server_to_client(self, pair: _Pair) -> None:
        while True:
            data = _recv(pair.server)
            if not data:
                pair.close()
                return
            if pair.cutting:  # the server's answer to COMMIT: it committed; drop it
                self.cuts += 1
                pair.close()
                return
            try:
                pair.client.sendall(data)
            except OSError:
                pair.close()
                return


class _Pair:
    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client = client
        self.server = server
        self.cutting = False

    def close(self) -> None:
        for sock in (self.client, self.server):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


def _recv(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except OSError:
        return b""


def _default_port(url: sa.URL) -> int:
    return 5432 if url.get_backend_name() == "postgresql" else 3306


__all__ = ["CommitCutter"]
