"""The served app: its script's flags and a page built for one session."""

from adass.dashboard import app_options, app_path, build_app


def test_app_options_and_page():
    options = app_options(["--runs", "some/dir", "--scheduler", "tcp://h:1"])
    assert {k: options[k] for k in ("runs_dir", "scheduler")} == {"runs_dir": "some/dir", "scheduler": "tcp://h:1"}
    assert options["policy"].schedulers == ("tcp://h:1",)  # the default scheduler is allowed
    page = build_app(poll=False)
    assert page.get_root() is not None


def test_the_served_script_is_the_checkouts_app():
    assert app_path() is not None and app_path().parent.name == "dashboard"
    assert "adass.dashboard" in app_path().read_text()
