"""What a browser user may start from the dashboard: data only from its folders, schedulers only from
its allow-list, capped workers and sizes; refusals quote no file; a token beyond loopback; unique folders."""

from pathlib import Path

import pytest

from adass.cli import main
from adass.config import RunConfig
from adass.dashboard import BackgroundRun, LiveFeed, RunError, app_options
from adass.dashboard.background import new_run_id
from adass.dashboard.policy import RunPolicy
from adass.registry import SpecError

TINY = {"data": "synthetic:n=120,d=4,classes=3,test=30", "model": "mlp:hidden=8", "batch_size": 16}


def _svm(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "d.svm"
    path.write_text("".join(f"{i % 3} 1:{i % 5} 2:{i % 7}\n" for i in range(60)))
    return path


def test_data_files_only_inside_the_given_folders(tmp_path):
    inside, outside = _svm(tmp_path / "data"), _svm(tmp_path / "elsewhere")
    policy = RunPolicy(data_dirs=(tmp_path / "data",))
    policy.check(RunConfig.from_flat(**{**TINY, "data": f"svmlight:{inside}"}))
    for spec in (f"svmlight:{outside}", f"svmlight:{tmp_path}/data/../elsewhere/d.svm", "svmlight:/etc/shadow",
                 f"svmlight:{inside},test={outside}", "idx:/etc"):  # fmt: skip
        with pytest.raises(SpecError, match="--data: this dashboard reads files only inside"):
            policy.check(RunConfig.from_flat(**{**TINY, "data": spec}))
    with pytest.raises(SpecError, match="--data-dir"):  # no folders given: no files at all
        RunPolicy().check(RunConfig.from_flat(**{**TINY, "data": f"svmlight:{inside}"}))


def test_schedulers_workers_and_sizes_are_capped():
    policy = RunPolicy(schedulers=("tcp://10.0.0.1:8786",), max_workers=2)
    policy.check(RunConfig.from_flat(**TINY, workers=2, scheduler="tcp://10.0.0.1:8786"))
    with pytest.raises(SpecError, match="--scheduler"):
        policy.check(RunConfig.from_flat(**TINY, workers=1, scheduler="tcp://evil:8786"))
    with pytest.raises(SpecError, match="--workers"):
        policy.check(RunConfig.from_flat(**TINY, workers=3))
    with pytest.raises(SpecError, match="GiB"):
        policy.check(RunConfig.from_flat(**{**TINY, "data": "synthetic:n=10000000,d=1000"}))


def test_a_refused_run_shows_one_line_that_quotes_no_file(tmp_path):
    secret = tmp_path / "data" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("root:*:19000:0:99999:7:::\n")
    policy = RunPolicy(data_dirs=(tmp_path / "data",))
    for spec in (f"svmlight:{secret}", "svmlight:/etc/shadow"):
        feed = LiveFeed()
        run = BackgroundRun(RunConfig.from_flat(**{**TINY, "data": spec}), feed, policy=policy).start()
        assert run.join(60)
        errors = [m.text for m in feed.drain() if isinstance(m, RunError)]
        assert len(errors) == 1 and errors[0].startswith("--data:") and "root:*" not in errors[0]


def test_the_served_app_reads_its_policy_from_its_flags(tmp_path):
    policy = app_options(
        ["--data-dir", str(tmp_path), "--allow-scheduler", "tcp://a:1", "--max-workers", "3"]
    )["policy"]
    assert policy == RunPolicy((tmp_path,), ("tcp://a:1",), 3)


def test_listening_beyond_loopback_needs_a_token(capsys):
    assert main(["dashboard", "--address", "0.0.0.0", "--port", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--token" in err


def test_runs_started_in_the_same_second_get_their_own_folders(tmp_path):
    config = RunConfig.from_flat(**TINY, epochs=1)
    ids = {new_run_id(config) for _ in range(50)}
    assert len(ids) == 50
    feeds = [LiveFeed(), LiveFeed()]
    runs = [BackgroundRun(config, feed, run_id="same", save_dir=tmp_path).start() for feed in feeds]
    assert all(run.join(60) for run in runs)
    assert sorted(run.outcome.split()[0] for run in runs) == [
        "failed",
        "finished",
    ]  # never both in one folder
