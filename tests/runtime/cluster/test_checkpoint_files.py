"""A checkpoint folder a rank cannot write or read is bad input (a restart could not mend it)."""

import pytest
import torch

from adass.registry import SpecError
from adass.runtime.cluster.actors import _read_state, _write_state


def test_state_round_trips_through_a_file(tmp_path):
    _write_state(tmp_path / "rank0.pt", {"step": torch.tensor([3])})
    assert _read_state(tmp_path / "rank0.pt")["step"].tolist() == [3]


def test_a_folder_that_is_not_there_is_named_with_what_a_cluster_needs(tmp_path):
    missing = tmp_path / "not-here" / "rank0.pt"
    with pytest.raises(SpecError, match=f"^--out: this process cannot write {missing} .*shared file system"):
        _write_state(missing, {"step": 1})
    with pytest.raises(SpecError, match=f"^--out: this process finds no {missing}; .*same path"):
        _read_state(missing)
