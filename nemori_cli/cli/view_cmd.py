"""`nemori view`: a read-only web page over one database and one user, served on 127.0.0.1.

The page (cli/view_static/: one HTML file, one script, one style sheet, no
build step and nothing from a CDN: users are offline) shows the timeline of
episodes by day, an episode's narrative and raw messages, the facts with
their validity and what replaced them, a fact's prediction-error audit
(`inspect fact`), and an as-of slider. It reads the JSON below.

Why the server is the standard library's: the page makes a handful of GET
requests to one user on one machine; a framework would add a dependency and
a start-up cost for nothing. What keeps it read-only and scoped:

- the store is opened read-only (as `inspect` opens it) and only GET is
  answered (anything else: 405);
- it serves the one user it was started for; a request that names another
  (``?user=``) is refused (403), and an id of another user's item is not
  found (404), as the store scopes every read by user;
- it listens on 127.0.0.1 only, on a free port chosen by the system, and
  answers only requests addressed to that name and port, one client unable to
  stall the others (cli/view_server.py);
- the page puts every text in with ``textContent`` and the server sends a
  Content-Security-Policy that allows no inline script: a message holding
  ``<script>`` is shown as text.
"""

from __future__ import annotations

import json
import re
import threading
from http import HTTPStatus
from importlib import resources
from typing import Annotated, Any
from urllib.parse import parse_qs, urlparse

import typer

from nemori_cli.cli import options as opt
from nemori_cli.cli.view_server import GuardedHandler, LoopbackServer, listen
from nemori_cli.errors import ConfigError

STATIC = {"/": ("index.html", "text/html"), "/app.js": ("app.js", "text/javascript"), "/app.css": ("app.css", "text/css")}
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'none'"
)


class ViewData:
    """What the page reads, as JSON: one user's memory in one read-only store."""

    def __init__(self, store: Any, user: str):
        self.store, self.user = store, user

    def summary(self) -> dict[str, Any]:
        from nemori_cli.services import read

        return read.overview(self.store, self.user)

    def episodes(self, as_of: str | None) -> dict[str, Any]:
        from nemori_cli.cli.render import episode_json
        from nemori_cli.services import read

        found = read.episodes(self.store, self.user, as_of=_moment(as_of))
        return {"episodes": [episode_json(e, with_messages=False) for e in found]}

    def episode(self, episode_id: int) -> dict[str, Any] | None:
        from nemori_cli.cli.render import episode_json
        from nemori_cli.services import read

        found = read.episode(self.store, self.user, episode_id, with_parts=False)
        return None if found is None else episode_json(found[0])

    def facts(self, as_of: str | None) -> dict[str, Any]:
        from nemori_cli.cli.render import fact_json
        from nemori_cli.services import read

        found = read.facts(self.store, self.user, as_of=_moment(as_of))
        return {"facts": [fact_json(f) for f in found]}

    def unbuilt(self) -> dict[str, Any]:
        """The messages not built into episodes yet, oldest first: until `nemori build` runs, they are the memory."""
        from nemori_cli.cli.render import message_json
        from nemori_cli.services import read

        found = read.unbuilt(self.store, self.user)
        return {"messages": [message_json(m) for m in found]}

    def fact(self, fact_id: int) -> dict[str, Any] | None:
        from nemori_cli.cli import fact_view

        found = fact_view.load(self.store, self.user, fact_id)
        return None if found is None else fact_view.as_json(found[0])


def _moment(value: str | None):
    from nemori_cli.dates import parse_as_of

    return parse_as_of(value) if value else None


_ITEM = re.compile(r"^/api/(episode|fact)/(\d+)$")


def _item_id(digits: str) -> int:
    # As the CLI refuses it (exit 2): the stores' integers are 64-bit, and int() of 5,000 digits raises.
    if len(digits) > len(str(opt.MAX_ID)) or int(digits) > opt.MAX_ID:
        raise ConfigError(f"not an id: {digits[:24]}{'…' if len(digits) > 24 else ''} (ids are at most {opt.MAX_ID})")
    return int(digits)


def handler(data: ViewData) -> type[GuardedHandler]:
    """A request handler bound to one user's data."""

    class Handler(GuardedHandler):
        server_version = "nemori-view"

        def get(self) -> None:
            from nemori_cli.errors import NemoriError

            url = urlparse(self.path)
            query = parse_qs(url.query)
            asked = query.get("user", [data.user])[0]
            if asked != data.user:
                self._json(HTTPStatus.FORBIDDEN, {"error": f"this view serves user {data.user} only"})
                return
            if url.path in STATIC:
                name, kind = STATIC[url.path]
                body = resources.files("nemori_cli.cli").joinpath("view_static", name).read_bytes()
                self._send(HTTPStatus.OK, body, f"{kind}; charset=utf-8")
                return
            as_of = query.get("as_of", [None])[0]
            try:
                if url.path == "/api/summary":
                    self._json(HTTPStatus.OK, data.summary())
                elif url.path == "/api/episodes":
                    self._json(HTTPStatus.OK, data.episodes(as_of))
                elif url.path == "/api/facts":
                    self._json(HTTPStatus.OK, data.facts(as_of))
                elif url.path == "/api/unbuilt":
                    self._json(HTTPStatus.OK, data.unbuilt())
                elif m := _ITEM.match(url.path):
                    kind, item_id = m.group(1), _item_id(m.group(2))
                    found = data.episode(item_id) if kind == "episode" else data.fact(item_id)
                    if found is None:
                        self._json(HTTPStatus.NOT_FOUND, {"error": f"no {kind} {item_id} for user {data.user}"})
                    else:
                        self._json(HTTPStatus.OK, found)
                else:
                    self._json(HTTPStatus.NOT_FOUND, {"error": f"no such page: {url.path}"})
            except NemoriError as e:  # a bad as_of, a store that went away: the page shows the line
                self._json(HTTPStatus.BAD_REQUEST, {"error": e.message})
            except data.store.errors as e:  # the file overwritten or damaged while served
                self._json(HTTPStatus.SERVICE_UNAVAILABLE, {"error": f"the database cannot be read now ({type(e).__name__}): {e}"})

        def _refuse(self) -> None:
            self._json(HTTPStatus.METHOD_NOT_ALLOWED, {"error": "this view is read-only"})

        do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _refuse  # noqa: N815 - http.server's names

        def _json(self, status: HTTPStatus, payload: dict[str, Any]) -> None:
            self._send(status, json.dumps(payload).encode("utf-8"), "application/json; charset=utf-8")

        def _send(self, status: HTTPStatus, body: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Content-Security-Policy", CSP)
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

    return Handler


def serve(data: ViewData, port: int = 0) -> LoopbackServer:
    """A server on 127.0.0.1 (``port`` 0: a free one); the caller runs ``serve_forever``."""
    return listen(port, handler(data))


EXAMPLES = "nemori view --db chat.db --user priya\nnemori view --port 8765 --no-open"  # the epilog: cli/help.py shows it as is


def view_cmd(
    db_path: opt.Db = None,
    user: opt.User = None,
    port: Annotated[int, typer.Option("--port", min=0, max=65535, metavar="PORT", help="The port (0: a free one).")] = 0,
    no_open: Annotated[bool, typer.Option("--no-open", help="Do not open the browser; print the address only.")] = False,
) -> None:
    """A read-only web page over the memory, in your browser.

    Episodes by day and their messages, the messages not built into
    episodes yet, facts and why they exist, as of any moment.
    """
    from nemori_cli.services.read import Reading

    reading = Reading(opt.settings(db_path, user))
    server = serve(ViewData(reading.store, reading.user), port)
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    typer.echo(f"nemori view: {url} (user {reading.user}; Ctrl-C stops it)")
    if not no_open:
        import webbrowser

        threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
