"""The HTTP side of `nemori view`: a loopback server that only its own page can talk to, and that one client cannot stall.

What it guards against, and how:

- DNS rebinding: a web page the user visits can point its own name at
  127.0.0.1 and read the answers, since the browser thinks it talks to the
  page's site. The browser still sends that name in ``Host`` (and the page's
  site in ``Origin``), so every request whose Host is not the loopback name
  and port served here, or whose Origin is another site, is refused (403)
  before anything is read.
- An idle or slow client: one thread per connection (the standard library's
  ThreadingHTTPServer), each socket with a timeout, and a bound on the
  connections served at once, so a client that sends half a request holds
  one thread for a few seconds, not the server.
- One store connection shared by the threads: requests are answered one at
  a time (a read transaction is per connection; the page makes a handful of
  small requests), while connections are read and parsed in parallel.
- Every refusal or failure is a JSON answer ``{"error": "..."}``, the form the
  page shows: the standard library's HTML error pages included.
"""

from __future__ import annotations

import json
import sys
import threading
import traceback
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from nemori_cli.errors import ConfigError

HOST = "127.0.0.1"
SOCKET_TIMEOUT_S = 10  # a client silent this long is dropped: a browser sends its request at once
MAX_CONNECTIONS = 32  # beyond this, a new connection is closed at once rather than queued behind idle ones


class LoopbackServer(ThreadingHTTPServer):
    """A threaded HTTP server on 127.0.0.1 that knows the names it may be reached by."""

    daemon_threads = True  # Ctrl-C stops the view even while a client holds a connection open

    def __init__(self, port: int, handler: type[BaseHTTPRequestHandler]):
        super().__init__((HOST, port), handler)
        self.serial = threading.Lock()  # one request answered at a time: they share one store connection
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        served = self.server_address[1]
        # Both loopback names of this port: neither can be made to point elsewhere by a web page.
        self.hosts = frozenset({f"{HOST}:{served}", f"localhost:{served}"})
        self.origins = frozenset(f"http://{h}" for h in self.hosts)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:  # no thread started: its slot is free again
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


class GuardedHandler(BaseHTTPRequestHandler):
    """Refuses requests not addressed to this loopback server, answers every error as JSON, and answers GET through ``get``."""

    server: LoopbackServer
    timeout = SOCKET_TIMEOUT_S  # StreamRequestHandler puts it on the socket

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        return  # quiet: the terminal shows where the page is, not every request or dropped client

    def handle(self) -> None:
        try:
            super().handle()
        except (BrokenPipeError, ConnectionResetError):  # the client left before its answer: nobody is left to tell
            self.close_connection = True

    def get(self) -> None:  # pragma: no cover - each view answers its own
        raise NotImplementedError

    def parse_request(self) -> bool:
        if not super().parse_request():
            return False
        refusal = self._refusal()
        if refusal:
            self.send_error(HTTPStatus.FORBIDDEN, refusal)
            return False
        return True

    def _refusal(self) -> str | None:
        """Why this request is not for us (a rebound name, another site's page), else None."""
        hosts = self.headers.get_all("Host") or []
        if len(hosts) != 1 or hosts[0].strip().lower() not in self.server.hosts:
            return f"this view answers only requests to http://{HOST}:{self.server.server_address[1]}/"
        origins = self.headers.get_all("Origin") or []
        if any(o.strip().lower() not in self.server.origins for o in origins):
            return "this view answers only its own page"
        return None

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self._answered = False
        try:
            with self.server.serial:
                self.get()
        except ValueError as e:  # a request the URL parser cannot read (an unclosed "[" in a host, ...)
            self._failed(HTTPStatus.BAD_REQUEST, f"bad request: {e}")
        except Exception as e:  # a bug: the client still gets JSON, and the traceback stays, to be reported
            traceback.print_exc(file=sys.stderr)
            self._failed(HTTPStatus.INTERNAL_SERVER_ERROR, f"internal error ({type(e).__name__}); see the terminal running nemori view")

    def _failed(self, status: HTTPStatus, message: str) -> None:
        if self._answered:  # part of an answer is out: all that is left is to close
            self.close_connection = True
            return
        self.send_json(status, {"error": message})

    def send_response(self, code: int, message: str | None = None) -> None:
        self._answered = True
        super().send_response(code, message)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own refusals (a bad request line, an unknown method, a header too long) as JSON too."""
        status = HTTPStatus(code)
        self.close_connection = True
        # A request line http.server could not read leaves the version at HTTP/0.9, which has no status line or
        # headers: the client (a browser, curl: HTTP/1.x all) would get a bare body it cannot tell from a page.
        if self.request_version == "HTTP/0.9":
            self.request_version = "HTTP/1.0"
        self.send_json(status, {"error": message or status.phrase.lower()})

    def send_json(self, status: HTTPStatus, payload: dict[str, Any]) -> None:
        body = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


def listen(port: int, handler: type[GuardedHandler]) -> LoopbackServer:
    """A server on 127.0.0.1 (``port`` 0: a free one); a port that cannot be had is one ConfigError line."""
    try:
        return LoopbackServer(port, handler)
    except OSError as e:
        raise ConfigError(f"cannot listen on {HOST}:{port} ({e.strerror or e}); give another --port, or --port 0 for a free one") from None
