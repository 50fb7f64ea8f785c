"""Build the dashboard page and serve it: ``adass dashboard`` and a checkout's ``dashboards/app.py``
both come here.

``panel serve dashboards/app.py --args --runs DIR --scheduler tcp://HOST:8786`` works as well; the app
reads those flags with :func:`app_options`.
"""

from __future__ import annotations

import argparse
import secrets
import signal
import socket
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dask
import panel as pn
from bokeh.document import Document

from ..registry import SpecError
from .board import RunBoard
from .own_process import process_context
from .page import Dashboard
from .policy import RunPolicy

__all__ = ["app_options", "build_app", "serve_dashboard"]


#: where ``pn.state.cache`` keeps the board of a server whose pages are built by a script (``panel serve``)
_BOARD_KEY = "adass-dashboard-runs"

#: A session is made when its page is requested and connects when the browser has loaded the scripts,
#: which under load (twenty tabs at once on two cores) takes tens of seconds. A session discarded
#: before its page connects is built a second time when it does, so unconnected sessions live two
#: minutes; a page that loses its connection stops polling at once (``Dashboard.attach``), so a closed
#: page costs memory until then, not work. Its run goes on.
SESSION_CLEANUP = {
    "check_unused_sessions_milliseconds": 5_000,
    "unused_session_lifetime_milliseconds": 120_000,
}


def app_options(argv: Sequence[str]) -> dict[str, Any]:
    """``--runs DIR``, ``--scheduler ADDR`` and the run policy (``--data-dir DIR``, ``--allow-scheduler
    ADDR``, ``--max-workers N``, each data-dir and scheduler flag repeatable) from a served script's
    arguments -> ``build_app`` keywords."""
    parser = argparse.ArgumentParser(prog="dashboards/app.py", add_help=False)
    parser.add_argument("--runs", default=None)
    parser.add_argument("--scheduler", default="")
    parser.add_argument("--data-dir", action="append", default=[])
    parser.add_argument("--allow-scheduler", action="append", default=[])
    parser.add_argument("--max-workers", type=int, default=RunPolicy.max_workers)
    args, _ = parser.parse_known_args(list(argv))
    schedulers = tuple(args.allow_scheduler) + ((args.scheduler,) if args.scheduler else ())
    policy = RunPolicy(tuple(Path(d) for d in args.data_dir), schedulers, args.max_workers)
    return {"runs_dir": args.runs, "scheduler": args.scheduler, "policy": policy}


def build_app(
    runs_dir: str | Path | None = None,
    scheduler: str = "",
    poll: bool = True,
    policy: RunPolicy | None = None,
    board: RunBoard | None = None,
) -> pn.viewable.Viewable:
    """A fresh dashboard page for one browser session.

    Parameters
    ----------
    runs_dir : path, optional
        Saved runs to compare (and where new runs are saved).
    scheduler : str
        Default Dask scheduler address.
    poll : bool
        Start the periodic callback that brings records to the page (needs a server or notebook).
    policy : RunPolicy, optional
        What the page's runs may use; the safe defaults (no data files, the embedded cluster only).
    board : RunBoard, optional
        The server's runs, shared by its pages; by default the one in the server's cache (what
        ``panel serve dashboards/app.py`` gets), made by the first page.
    """
    pn.extension()
    if board is None:
        board = pn.state.cache.setdefault(_BOARD_KEY, RunBoard())
    dashboard = Dashboard(runs_dir, scheduler, policy=policy, board=board)
    if poll:
        dashboard.attach()
    return dashboard.panel()


def _loopback(address: str) -> bool:
    return address in ("127.0.0.1", "localhost", "::1") or address.startswith("127.")


def _origins(address: str, port: int) -> list[str]:
    if address in ("127.0.0.1", "localhost"):
        return [f"127.0.0.1:{port}", f"localhost:{port}"]
    if address in ("0.0.0.0", "::", ""):
        return ["*"]  # every interface: the page may be reached under any of this host's names
    return [f"{address}:{port}"]


def _check_free(address: str, port: int) -> None:
    """Fail with one line, before the server starts, when ``address:port`` cannot be listened on."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server itself will
            probe.bind((address, port))
    except OSError as err:  # taken port, unknown address
        raise SpecError(
            f"--port/--address: cannot listen on {address}:{port} ({err.strerror or err})"
        ) from None


def serve_dashboard(port: int = 5006, address: str = "127.0.0.1", runs_dir: str | Path | None = None,
                    scheduler: str = "", show: bool = False, data_dirs: Sequence[str | Path] = (),
                    allow_schedulers: Sequence[str] = (), max_workers: int = RunPolicy.max_workers,
                    token: str = "") -> None:  # fmt: skip
    """Serve the dashboard until interrupted (Ctrl-C or SIGTERM).

    Every session gets the page :func:`build_app` makes from the same flags a served
    ``dashboards/app.py`` reads (so ``panel serve`` and this serve the same page). Its runs read data files only inside ``data_dirs``
    and use only ``scheduler`` and ``allow_schedulers`` (see :class:`RunPolicy`). Listening beyond
    this machine (an ``address`` other than loopback) needs a ``token``: the page asks for it as a
    password.
    """
    if not _loopback(address) and not token:
        raise SpecError(f"--address: {address} is reachable from other machines; give --token SECRET "
                        "(the page then asks for it)")  # fmt: skip
    argv = [*(["--runs", str(runs_dir)] if runs_dir is not None else []),
            *(["--scheduler", scheduler] if scheduler else []),
            *[arg for d in data_dirs for arg in ("--data-dir", str(d))],
            *[arg for a in allow_schedulers for arg in ("--allow-scheduler", a)],
            "--max-workers", str(max_workers)]  # fmt: skip
    options = app_options(argv)
    board = RunBoard()  # the runs outlive their pages; they end with the server

    def app() -> Any:
        return build_app(**options, board=board)

    _check_free(address, port)
    threading.Thread(target=_warm_runs, name="adass-warm-runs", daemon=True).start()
    _warm(options)
    auth = {"basic_auth": token, "cookie_secret": secrets.token_urlsafe(32)} if token else {}
    try:
        server = pn.serve({"/": app}, port=port, address=address, websocket_origin=_origins(address, port),
                          show=show, start=False, title="adass dashboard", verbose=False, **auth,
                          **SESSION_CLEANUP)  # fmt: skip
    except OSError as err:  # taken port, unknown address
        raise SpecError(
            f"--port/--address: cannot listen on {address}:{port} ({err.strerror or err})"
        ) from None
    print(f"adass dashboard: http://{address}:{server.port}/", flush=True)

    def stop(*_: Any) -> None:
        server.io_loop.asyncio_loop.call_soon_threadsafe(server.io_loop.stop)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    _quiet_closed_pages(server.io_loop.asyncio_loop)
    try:
        server.start()
        server.io_loop.start()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        server.stop()
        board.stop_all()  # each run tears its own cluster down


def _warm_runs() -> None:
    """Start the process server that a page's runs start from, its imports paid before the first
    Start. The embedded Dask cluster of a page's run forks its workers from the same server instead of
    spawning fresh interpreters that import torch and the toolkit again (seconds each on a small
    machine, before the first epoch can begin)."""
    if process_context().get_start_method() == "forkserver":
        dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"})


def _warm(options: dict[str, Any]) -> None:
    """Build a page and draw a plot, both thrown away: the first visitor and the first run's first
    curve do not wait for imports and caches that every later page finds ready."""
    import holoviews as hv

    build_app(**options, poll=False, board=RunBoard()).get_root(Document())
    hv.renderer("bokeh").get_plot(hv.Curve([(0, 0), (1, 1)]))


def _quiet_closed_pages(loop: Any) -> None:
    """A page closed while an update was on its way leaves a write that failed on a closed socket;
    that is how a page ends, so it is not logged as an error (every other exception still is)."""
    from tornado.iostream import StreamClosedError
    from tornado.websocket import WebSocketClosedError

    previous = loop.get_exception_handler()

    def handler(loop: Any, context: dict[str, Any]) -> None:
        if isinstance(context.get("exception"), (WebSocketClosedError, StreamClosedError)):
            return
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handler)
