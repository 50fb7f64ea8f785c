"""The commands' own options: flags, help and checks all come from their param definitions."""

import param
import pytest

from adass.cli import main
from adass.cli.command_options import (
    BenchOptions,
    CompareOptions,
    DashboardOptions,
    ReproduceOptions,
    TrainOptions,
    check_command_options,
)
from adass.config import flag_for, options
from adass.options import allowed
from adass.registry import SpecError

COMMANDS = {
    "train": TrainOptions,
    "compare": CompareOptions,
    "bench": BenchOptions,
    "dashboard": DashboardOptions,
    "reproduce": ReproduceOptions,
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_option_has_a_flag_with_its_doc(command, capsys):
    argv = [command, "samplers", "--help"] if command == "bench" else [command, "--help"]
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # help wraps lines
    for option, p in options(COMMANDS[command]).items():
        assert flag_for(option) in text and " ".join(p.doc.split())[:30] in text
        if isinstance(p, param.Number):
            assert allowed(p) in text


def test_defaults_come_from_the_definitions():
    assert check_command_options(DashboardOptions, {}) == {
        "port": 5006, "address": "127.0.0.1", "runs": None, "show": False, "data_dir": [], "allow_scheduler": [],
        "max_workers": 8, "token": "",
    }  # fmt: skip
    values = check_command_options(
        CompareOptions, {"samplers": ["random:ratio=0.5"], "seeds": "3", "out": "x"}
    )
    assert values["samplers"] == ["random:ratio=0.5"] and values["seeds"] == 3 and values["codecs"] == []


@pytest.mark.parametrize(
    "command, given, start",
    [
        (CompareOptions, {"seeds": "101"}, "--seeds: 101 is not allowed; expected an integer in [1, 100]"),
        (CompareOptions, {"seeds": "nan"}, "--seeds: 'nan' is not allowed"),
        (
            CompareOptions,
            {"samplers": ["full", "adass:eps=nan"]},
            "--samplers: sampler 'adass:eps=nan': eps=nan",
        ),
        (CompareOptions, {"codecs": ["randk:ratio=inf"]}, "--codecs: codec 'randk:ratio=inf': ratio=inf"),
        (CompareOptions, {"exchanges": ["ps:servers=0"]}, "--exchanges: exchange 'ps:servers=0': servers=0"),
        (
            DashboardOptions,
            {"port": "inf"},
            "--port: 'inf' is not allowed; expected an integer in [1, 65535]",
        ),
        (DashboardOptions, {"runs": "/nonexistent/runs"}, "--runs: /nonexistent/runs is not allowed"),
        (TrainOptions, {"resume": "/nonexistent/run"}, "--resume: /nonexistent/run is not allowed"),
    ],
)
def test_bad_values_fail_in_one_line_from_the_definition(command, given, start):
    with pytest.raises(SpecError) as err:
        check_command_options(command, given)
    assert str(err.value).startswith(start) and "\n" not in str(err.value)


def test_out_must_not_be_a_file(tmp_path, capsys):
    path = tmp_path / "taken"
    path.write_text("")
    assert main(["bench", "samplers", "--quick", "--out", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--out" in err and "expected a folder" in err
