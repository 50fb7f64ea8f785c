"""Build the dashboard page and serve it: ``adass dashboard`` and ``adass/dashboard/app.py`` both come here.

``panel serve PATH/TO/adass/dashboard/app.py --args --runs DIR --scheduler tcp://HOST:8786`` works as well; the app
reads those flags with :func:`app_options`.
"""

from __future__ import annotations

import argparse
import signal
import socket
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import panel as pn

from ..registry import SpecError
from .page import Dashboard

__all__ = ["app_options", "app_path", "build_app", "serve_dashboard"]


def app_options(argv: Sequence[str]) -> dict[str, Any]:
    """``--runs DIR`` and ``--scheduler ADDR`` from a served script's arguments -> ``build_app`` keywords."""
    parser = argparse.ArgumentParser(prog="adass/dashboard/app.py", add_help=False)
    parser.add_argument("--runs", default=None)
    parser.add_argument("--scheduler", default="")
    args, _ = parser.parse_known_args(list(argv))
    return {"runs_dir": args.runs, "scheduler": args.scheduler}


def build_app(
    runs_dir: str | Path | None = None, scheduler: str = "", poll: bool = True
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
    """
    pn.extension()
    dashboard = Dashboard(runs_dir, scheduler)
    if poll:
        dashboard.attach()
    return dashboard.panel()


def app_path() -> Path | None:
    """The servable page ``adass/dashboard/app.py``, shipped as package data (None if it is missing)."""
    path = Path(str(resources.files(__package__) / "app.py"))
    return path if path.is_file() else None


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
                    scheduler: str = "", show: bool = False) -> None:  # fmt: skip
    """Serve the dashboard until interrupted (Ctrl-C or SIGTERM).

    The page is ``adass/dashboard/app.py`` (so ``panel serve`` and this serve the same file), else the
    same app built here.
    """
    from panel.io.application import build_single_handler_application

    argv = [*(["--runs", str(runs_dir)] if runs_dir is not None else []),
            *(["--scheduler", scheduler] if scheduler else [])]  # fmt: skip
    script = app_path()
    app: Any = (build_single_handler_application(str(script), argv) if script is not None
                else (lambda: build_app(runs_dir, scheduler)))  # fmt: skip
    _check_free(address, port)
    try:
        server = pn.serve({"/": app}, port=port, address=address, websocket_origin=_origins(address, port),
                          show=show, start=False, title="adass dashboard", verbose=False)  # fmt: skip
    except OSError as err:  # taken port, unknown address
        raise SpecError(
            f"--port/--address: cannot listen on {address}:{port} ({err.strerror or err})"
        ) from None
    print(f"adass dashboard: http://{address}:{server.port}/", flush=True)

    def stop(*_: Any) -> None:
        server.io_loop.asyncio_loop.call_soon_threadsafe(server.io_loop.stop)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.start()
        server.io_loop.start()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        server.stop()
