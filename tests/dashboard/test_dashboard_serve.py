"""The served app: its script's flags and a page built for one session."""

from adass.dashboard import app_options, build_app


def test_app_options_and_page():
    options = app_options(["--runs", "some/dir", "--scheduler", "tcp://h:1"])
    assert {k: options[k] for k in ("runs_dir", "scheduler")} == {
        "runs_dir": "some/dir",
        "scheduler": "tcp://h:1",
    }
    assert options["policy"].schedulers == ("tcp://h:1",)  # the default scheduler is allowed
    page = build_app(poll=False)
    assert page.get_root() is not None


def test_panel_serve_of_the_checkouts_dashboards_app_answers_with_the_page(tmp_path):
    import socket
    import subprocess
    import sys
    import time
    import urllib.request
    from pathlib import Path

    app = Path(__file__).resolve().parents[2] / "dashboards" / "app.py"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [sys.executable, "-m", "panel", "serve", str(app), "--address", "127.0.0.1", "--port", str(port),
               "--allow-websocket-origin", f"127.0.0.1:{port}", "--args", "--runs", str(tmp_path)]  # fmt: skip
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline, page = time.time() + 90, ""
        while time.time() < deadline and not page:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/app", timeout=30) as answer:
                    page = answer.read().decode()
            except OSError:
                time.sleep(0.5)
        assert "adass dashboard" in page
    finally:
        server.terminate()
        server.wait(timeout=30)
