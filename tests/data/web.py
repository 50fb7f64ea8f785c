"""A web server on 127.0.0.1 for one test: serves a folder, answers range requests, counts what it sent.

Run as a script (``python web.py FOLDER ADDRESS PORT``) it serves the folder at that address until it
is ended, and prints ``CLIENT_ADDRESS "REQUEST" STATUS`` for each answer: the network lab's tests
start it inside a lab host.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path


class _RangeHandler(http.server.SimpleHTTPRequestHandler):
    """Python's file handler, plus ``Range: bytes=a-b`` (as web servers and object stores answer)."""

    sent: list[tuple[str, int]]  # (path, bytes of body) per answer

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def handle(self) -> None:
        try:
            super().handle()
        except (BrokenPipeError, ConnectionResetError):  # a client that asked for headers only, then hung up
            pass

    def send_head(self):  # noqa: ANN201 - the base class's protocol
        match = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        path = Path(self.translate_path(self.path))
        if match is None or not path.is_file():
            return super().send_head()
        data = path.read_bytes()
        start = int(match.group(1))
        stop = min(len(data), int(match.group(2)) + 1 if match.group(2) else len(data))
        body = data[start:stop]
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {start}-{stop - 1}/{len(data)}")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        return _Body(body)

    def copyfile(self, source, outputfile) -> None:  # noqa: ANN001
        body = source.read()
        self.sent.append((self.path, len(body)))
        outputfile.write(body)


class _Body:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self, *_: object) -> bytes:
        return self.data

    def close(self) -> None:
        pass


@contextlib.contextmanager
def serve(folder: Path) -> Iterator[tuple[str, list[tuple[str, int]]]]:
    """``(base URL, answers sent)`` of a server on a free port of 127.0.0.1, for the block's duration."""
    sent: list[tuple[str, int]] = []
    handler = type("Handler", (_RangeHandler,), {"sent": sent})
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=str(folder))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", sent
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class _Logged(_RangeHandler):
    """The range handler, saying who asked for what (one line per answer, flushed at once)."""

    sent: list[tuple[str, int]] = []

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        print(f'{self.client_address[0]} "{self.requestline}" {code}', flush=True)


def main(folder: str, address: str, port: str) -> None:
    server = http.server.ThreadingHTTPServer(
        (address, int(port)), functools.partial(_Logged, directory=folder)
    )
    print(f"serving {folder} at http://{address}:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(*sys.argv[1:])
