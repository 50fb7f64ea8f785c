"""``--straggler-only`` is refused where it does not apply (the straggler part's tables are checked on
the quick dml run, in test_bench_dml.py)."""

import pytest

from adass.cli import main


@pytest.mark.parametrize("argv, words", [
    (["bench", "exchange", "--straggler-only"], ["--straggler-only", "'exchange'"]),
    (["bench", "dml", "--straggler-only", "--netlab", "1gbit"], ["--straggler-only", "--netlab"]),
])  # fmt: skip
def test_the_straggler_only_option_is_refused_where_it_does_not_apply(argv, words, tmp_path, capsys):
    assert main([*argv, "--out", str(tmp_path)]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and all(w in err[0] for w in words)
