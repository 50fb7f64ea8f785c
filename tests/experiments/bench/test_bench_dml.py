"""The dml benchmark runs end to end in quick mode and writes its tables, parts (c) colocated PS and
(d) the straggler included, all from one quick run (timings are not asserted)."""

import contextlib
import io
import os
import subprocess

import pandas as pd
import pytest
import torch

from adass.cli import main
from adass.experiments.bench import dml, dml_colocated, dml_straggler, netlab_dml
from adass.experiments.bench.ddp import parse_hook
from adass.netlab import LabError, require_tools
from adass.registry import SpecError


@pytest.fixture(scope="module")
def quick_dml(tmp_path_factory):
    """One ``adass bench dml --quick``: its folder and what it printed."""
    out = tmp_path_factory.mktemp("dml")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["bench", "dml", "--quick", "--out", str(out)]) == 0
    return out, printed.getvalue()


def test_quick_bench_writes_tables(quick_dml):
    tmp_path, printed = quick_dml
    assert "ring fp32 step time <= 1.15x DDP's" in printed and "within 0.3 points" in printed
    assert (tmp_path / "dml.md").read_text().startswith("# adass bench dml")
    assert (tmp_path / "dml_straggler.md").exists()  # part (d), the straggler case

    grid = pd.read_csv(tmp_path / "dml.csv", keep_default_na=False, na_values=[""])
    assert list(grid.columns) == dml.COLUMNS
    arms = len(dml.EXCHANGES) * len(dml.CODECS) * len(dml.LINKS)
    assert len(grid) == len(dml.QUICK.workers) * (1 + arms)
    ddp = grid[grid["exchange"] == dml.DDP]
    assert list(ddp["workers"]) == list(dml.QUICK.workers) and (ddp["step_vs_ddp"] == 1.0).all()
    ours = grid[grid["exchange"] != dml.DDP]
    assert set(ours["link"]) == set(dml.LINKS) and set(ours["codec"]) == set(dml.CODECS)
    assert set(ours["exchange"]) == {dml.RING, dml.PS, dml.QSGD_RING}
    assert ours["comm_share"].between(0, 1).all() and (ours["step_ms"] > 0).all()
    # what reaching the data cost each arm's replicas: a shard and the test split, read in some time
    assert (ours["load_s"] > 0).all() and (ours["data_MB_replica"] > 0).all()
    assert ddp[["load_s", "data_MB_replica"]].isna().all().all()

    # ring rows against PS: the paired fp32 row a median of per-round ratios, the others plain ratios
    on_ring = ours["exchange"].isin([dml.RING, dml.QSGD_RING])
    assert (ours.loc[on_ring, "epoch_vs_ps"] > 0).all() and ours.loc[~on_ring, "epoch_vs_ps"].isna().all()
    assert grid.loc[grid["exchange"] == dml.DDP, "epoch_vs_ps"].isna().all()
    ps = ours[ours["exchange"] == dml.PS].set_index(["workers", "codec", "link"])["epoch_s"]
    for row in ours[on_ring].itertuples(index=False):
        if (row.codec, row.link) != ("fp32", "none"):
            assert abs(row.epoch_vs_ps - row.epoch_s / ps[(row.workers, row.codec, row.link)]) < 1e-9
    assert "ring epoch time below PS's" in printed and "median of paired runs" in printed

    # the same run: traffic follows the codec, and a lossless ring matches DDP's arithmetic
    by = ours[ours["link"] == "none"].set_index(["exchange", "codec"])
    fp32 = by.loc[(dml.RING, "fp32")]
    assert by.loc[(dml.QSGD_RING, "qsgd:bits=8"), "wire_MB_epoch"] < 0.5 * fp32["wire_MB_epoch"]
    assert by.loc[(dml.RING, "randk:ratio=0.01"), "wire_MB_epoch"] < 0.1 * fp32["wire_MB_epoch"]
    assert abs(fp32["test_acc"] - ddp["test_acc"].iloc[0]) <= 0.02

    adass = pd.read_csv(tmp_path / "dml_adass.csv")
    assert list(adass.columns) == dml.ADASS_COLUMNS
    assert list(adass["workers"]) == [0, 0, *dml.QUICK.workers]
    assert (adass["seeds"] == len(dml.QUICK.adass_seeds)).all()
    assert (adass.loc[adass["run"] == dml.SINGLE, "acc_vs_single_pts"] == 0).all()
    assert (adass.loc[adass["sampler"] == dml.QUICK.adass, "backprop_frac"] < 1).all()

    # the summary is the mean over the per-seed runs, each compared with its own seed in one process
    runs = pd.read_csv(tmp_path / "dml_adass_runs.csv")
    assert list(runs.columns) == dml.RUN_COLUMNS
    assert len(runs) == len(dml.QUICK.adass_seeds) * (2 + len(dml.QUICK.workers))
    assert sorted(runs["seed"].unique()) == sorted(dml.QUICK.adass_seeds)
    single = runs[(runs["run"] == dml.SINGLE) & (runs["sampler"] == dml.QUICK.adass)].set_index("seed")
    for row in adass[adass["workers"] > 0].itertuples(index=False):
        mine = runs[runs["run"] == row.run].set_index("seed")
        diffs = 100 * (mine["test_acc"] - single["test_acc"])
        assert abs(row.acc_vs_single_pts - diffs.mean()) < 1e-9
        assert abs(row.test_acc - mine["test_acc"].mean()) < 1e-9


def test_quick_colocated_part_writes_its_table_and_goals(quick_dml):
    tmp_path, printed = quick_dml
    assert "colocated PS epoch time no worse than dedicated" in printed
    assert "## (c) colocated PS vs dedicated servers" in (tmp_path / "dml.md").read_text()
    table = pd.read_csv(tmp_path / "dml_colocated.csv")
    assert list(table.columns) == dml_colocated.COLUMNS
    plan = dml_colocated.QUICK_PLAN
    p, s = plan.workers, plan.servers
    assert list(zip(table["update"], table["placement"], strict=True)) == [
        ("replica", "dedicated"),
        ("replica", "colocated"),
        ("server", "dedicated"),
        ("server", "colocated"),
    ]
    by = table.set_index(["update", "placement"])
    for update in ("replica", "server"):
        # the ranks that exchanged: P replicas, plus S server workers only where they are dedicated
        assert by.loc[(update, "colocated"), "dask_workers"] == p
        assert by.loc[(update, "dedicated"), "dask_workers"] == p + s
        assert by.loc[(update, "colocated"), "messages_step"] == 2 * (p - 1) * s
        assert by.loc[(update, "dedicated"), "messages_step"] == 2 * p * s
        assert by.loc[(update, "colocated"), "test_acc"] == by.loc[(update, "dedicated"), "test_acc"]
        assert by.loc[(update, "colocated"), "epoch_vs_dedicated"] > 0
    goals = dml_colocated.targets(table)
    assert len(goals) == 6 and set(goals["met"]) <= {"yes", "no"}
    assert (goals[goals["goal"].str.contains("Dask workers|accuracy")]["met"] == "yes").all()


def test_quick_straggler_part_writes_tables(quick_dml):
    tmp_path, printed = quick_dml
    assert "an SSP arm >= 1.5x faster than the sync ring" in printed and "async reported" in printed
    assert (tmp_path / "dml_straggler.md").read_text().startswith("# adass bench dml: a straggler")
    table = pd.read_csv(tmp_path / "dml_straggler.csv")
    assert list(table.columns) == dml_straggler.COLUMNS
    plan = dml_straggler.QUICK
    assert len(table) == len(plan.stragglers) * len(dml_straggler.ARMS)
    assert list(table["arm"]) == list(dml_straggler.ARMS) * len(plan.stragglers)
    ring = table[table["arm"] == "ring sync"]
    assert (ring["speedup_vs_ring"] == 1.0).all() and (ring["acc_vs_ring_pts"] == 0.0).all()
    in_lock_step = table["arm"].isin(["ring sync", "ps sync"])
    assert (table.loc[in_lock_step, "staleness_max"] == 0).all()
    assert (table["epoch_s"] > 0).all() and table["test_acc"].between(0, 1).all()
    ssp = table[table["arm"].str.contains("ssp")]
    assert (ssp["staleness_max"] >= 0).all()
    runs = pd.read_csv(tmp_path / "dml_straggler_runs.csv")
    assert len(runs) == len(table) * len(plan.seeds)


@pytest.mark.netlab
def test_quick_lab_bench_counts_kernel_bytes(tmp_path, capsys, monkeypatch):
    """``--netlab``: every arm on a lab of ``--lab-workers`` replicas, kernel bytes per step counted, the
    lab gone afterwards."""
    try:
        require_tools()
    except LabError as err:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the network lab is needed under CI=true: {err}")
        pytest.skip(f"no network lab here: {err}")
    built, up = [], netlab_dml.lab_up  # the suite's own lab: other labs may come and go meanwhile

    def lab_up(*args, **kwargs):
        built.append(up(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(netlab_dml, "lab_up", lab_up)
    argv = ["bench", "dml", "--quick", "--netlab", "1gbit", "--lab-workers", "3", "--out", str(tmp_path)]
    assert main(argv) == 0
    assert len(built) == 1 and len(built[0].hosts) == 4
    prefix = f"{built[0].prefix}-"
    assert not {ns for ns in _namespaces() if ns.startswith(prefix)}  # the suite's lab is torn down
    printed = capsys.readouterr().out
    assert "ring qsgd:bits=8 >= 2.5x faster than DDP fp32" in printed
    report = (tmp_path / "dml.md").read_text()
    assert report.startswith("# adass bench dml --netlab")
    assert "Network lab: 4 hosts" in report and "P = 3;" in report  # the quick plan's P = 2 replaced

    table = pd.read_csv(tmp_path / "dml.csv", keep_default_na=False, na_values=[""])
    assert list(table.columns) == netlab_dml.LAB_COLUMNS
    assert list(table["arm"]) == [a.name for a in netlab_dml.ARMS]
    assert (table["rate"] == "1gbit").all() and (table["step_ms"] > 0).all()
    assert table.loc[table["arm"] == netlab_dml.DDP_FP32, "step_vs_ddp"].tolist() == [1.0]
    ours = table[table["wire_MB_step"].notna()]
    assert len(ours) == sum(1 for a in netlab_dml.ARMS if a.exchange)
    # the kernel carried at least what the runs say they sent, and not absurdly more (Dask's own
    # messages and headers come on top: a tiny model's steps are mostly that)
    assert (table["kernel_MB_step"] > 0).all()
    assert (ours["kernel_MB_step"] >= ours["wire_MB_step"]).all()
    assert (table["kernel_MB_step"] < 1.0).all()
    assert table["test_acc"].between(0, 1).all()


def _namespaces() -> set[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in listed.splitlines() if line.strip()}


def test_lab_rates_and_ddp_hooks_are_checked_in_one_line():
    assert netlab_dml.parse_rates("1gbit, 100mbit") == ["1gbit", "100mbit"]
    with pytest.raises(SpecError, match="--netlab: 'fast' is not allowed"):
        netlab_dml.parse_rates("1gbit,fast")
    assert parse_hook("powersgd:rank=4") == ("powersgd", {"rank": "4"}) and parse_hook("fp16") == ("fp16", {})
    for bad in ("powersgd:rank=x", "fp16:rank=1", "bf16", "powersgd:rank"):
        with pytest.raises(SpecError, match="DDP hook"):
            parse_hook(bad)


def test_netlab_is_refused_by_other_suites(tmp_path, capsys):
    assert main(["bench", "samplers", "--netlab", "1gbit", "--out", str(tmp_path)]) == 2
    assert "--netlab: only the dml and faults suites" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--netlab", "1gbit,100mbit"],
            "--netlab: the faults suite runs at one link rate, not '1gbit,100mbit'",
        ),
        (
            ["--netlab", "1gbit", "--lab-workers", "3"],
            "--lab-workers: only the dml suite sizes its network lab",
        ),
    ],
)
def test_the_faults_suite_on_a_lab_is_checked_in_one_line_before_anything_is_written(
    tmp_path, capsys, argv, message
):
    out = tmp_path / "out"
    assert main(["bench", "faults", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--lab-workers", "3"], "--lab-workers: 3 is not allowed without --netlab"),
        (
            ["--netlab", "1gbit", "--lab-workers", "1"],
            "--lab-workers: 1 is not allowed; expected an integer in [2, 16]",
        ),
        (
            ["--netlab", "1gbit", "--lab-workers", "four"],
            "--lab-workers: 'four' is not allowed; expected an integer",
        ),
    ],
)
def test_lab_workers_are_checked_in_one_line(tmp_path, capsys, argv, message):
    out = tmp_path / "out"
    assert main(["bench", "dml", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()  # refused before anything is written


def _lab_table(rs_ms: tuple[float, ...], rs_acc: tuple[float, ...], arms=None) -> pd.DataFrame:
    """One rate and model: every lab arm (or ``arms``) at 100 ms and accuracy 0.9, but the RS-ADASS arms
    as given; unpaired, the ratios as the suite computes them."""
    rows = []
    for arm in netlab_dml.ARMS if arms is None else arms:
        ms, acc = 100.0, 0.9
        if arm.codec in netlab_dml.RS_CODECS:
            i = netlab_dml.RS_CODECS.index(arm.codec)
            ms, acc = rs_ms[i], rs_acc[i]
        rows.append({"rate": "100mbit", "model": "mlp", "params": 10, "arm": arm.name, "step_ms": ms,
                     "kernel_MB_step": 1.0, "wire_MB_step": 1.0, "compute_ms": 1.0, "link_ms": 1.0,
                     "test_acc": acc, "pair_ratio": float("nan")})  # fmt: skip
    return pd.DataFrame(rows)


def _targets(table: pd.DataFrame) -> pd.DataFrame:
    return netlab_dml.lab_targets(netlab_dml._with_ratios(table))


def test_rs_adass_goal_needs_one_arm_both_faster_and_as_accurate():
    def rs_goals(table: pd.DataFrame) -> pd.DataFrame:
        goals = _targets(table)
        return goals[goals["goal"].str.startswith("RS-ADASS")]

    assert len(netlab_dml.RS_CODECS) == 7
    # the sparser arms are faster but less accurate, the densest as accurate but slower: not met
    missed = rs_goals(
        _lab_table((50.0, 70.0, 65.0, 150.0, 140.0, 120.0, 130.0), (0.85, 0.88, 0.88, 0.95, 0.93, 0.93, 0.94))
    )
    assert len(missed) == len(netlab_dml.PSGD_RANKS) and (missed["met"] == "no").all()
    assert netlab_dml.RS_CODECS[3] in missed["measured"].iloc[0]  # the most accurate arm is shown
    # arms both faster and as accurate: met, and the fastest of them is the one reported
    met = rs_goals(
        _lab_table((50.0, 80.0, 85.0, 150.0, 95.0, 90.0, 60.0), (0.85, 0.9, 0.9, 0.95, 0.9, 0.91, 0.9))
    )
    assert (met["met"] == "yes").all()
    assert met["measured"].str.startswith(netlab_dml.RS_CODECS[6]).all()


def test_powersgd_goal_compares_each_rank_with_ddp_hook():
    table = _lab_table((100.0,) * 7, (0.9,) * 7)
    table.loc[table["arm"] == "ring PowerSGD rank 2", "step_ms"] = 111.0  # 1.11x the hook's 100 ms
    goals = _targets(table)
    psgd = goals[goals["goal"].str.startswith("ring PowerSGD")].set_index("goal")["met"]
    assert list(psgd) == ["yes", "no", "yes"] and "rank 2 step" in psgd.index[1]
    # paired rounds: the median of the per-round ratios decides, not the ratio of the median times
    table.loc[table["arm"] == "ring PowerSGD rank 2", "pair_ratio"] = 1.05
    psgd = _targets(table).set_index("goal")["met"]
    assert psgd[psgd.index.str.startswith("ring PowerSGD rank 2")].tolist() == ["yes"]


def test_powersgd_only_reads_the_powersgd_goals_alone():
    table = _lab_table((), (), arms=netlab_dml.POWERSGD_ARMS)
    assert [a.name for a in netlab_dml.POWERSGD_ARMS][0] == netlab_dml.DDP_FP32
    assert {a.name for a in netlab_dml.POWERSGD_ARMS} - {netlab_dml.DDP_FP32} == {
        a.name for a in netlab_dml.ARMS if "PowerSGD" in a.name
    }
    ratios = netlab_dml._with_ratios(table)
    assert ratios["step_vs_hook"].notna().sum() == len(netlab_dml.PSGD_RANKS)
    goals = netlab_dml.lab_targets(ratios)
    assert len(goals) == len(netlab_dml.PSGD_RANKS) and goals["goal"].str.startswith("ring PowerSGD").all()
    plan = netlab_dml._plan(False, None, powersgd_only=True)
    assert plan.arms == netlab_dml.POWERSGD_ARMS and len(plan.paired) == len(netlab_dml.PSGD_RANKS)
    assert netlab_dml._plan(False, None).paired[0] == (netlab_dml.DDP_FP32, "ring fp32")


@pytest.mark.parametrize(
    "argv",
    [
        ["samplers", "--powersgd-only"],
        ["dml", "--powersgd-only"],
        ["faults", "--netlab", "1gbit", "--powersgd-only"],
    ],
)
def test_powersgd_only_is_refused_off_the_dml_lab(tmp_path, capsys, argv):
    out = tmp_path / "out"
    assert main(["bench", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert (
        "--powersgd-only: only the dml suite on a network lab" in err and len(err.strip().splitlines()) == 1
    )
    assert not out.exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["samplers", "--device", "cpu"], "--device: only the dml suite on this machine's cluster takes a device (not 'samplers')"),
        (["dml", "--netlab", "1gbit", "--device", "cpu"], "--device: only the dml suite on this machine's cluster takes a device (the network lab's"),
    ],
)  # fmt: skip
def test_a_device_is_for_the_dml_suite_on_this_machine(tmp_path, capsys, argv, message):
    assert main(["bench", *argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_a_cuda_bench_without_a_gpu_is_refused_before_any_cluster_starts(tmp_path, capsys):
    assert main(["bench", "dml", "--quick", "--device", "cuda", "--out", str(tmp_path / "out")]) == 2
    assert "--device: 'cuda' needs a CUDA GPU" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.cuda
def test_quick_bench_on_cuda_writes_tables(tmp_path):
    assert main(["bench", "dml", "--quick", "--device", "cuda", "--out", str(tmp_path)]) == 0
    assert "replicas on `cuda`" in (tmp_path / "dml.md").read_text()
    assert (tmp_path / "dml.csv").exists() and (tmp_path / "dml_straggler.md").exists()
