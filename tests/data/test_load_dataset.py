"""``load_dataset`` and the registry entries: names, canonical specs and unknown datasets."""

from __future__ import annotations

from pathlib import Path

import pytest

from adass.data import DATASETS, absolute_paths, load_dataset
from adass.registry import SpecError


def test_every_loader_is_registered():
    assert DATASETS.names() == [
        "cifar10",
        "cifar100",
        "csv",
        "idx",
        "mnist5k",
        "npy",
        "parquet",
        "svmlight",
        "synthetic",
    ]


def test_name_is_the_spec():
    data = load_dataset(" synthetic:n=50, test=10 ")
    assert data.name == "synthetic:n=50,test=10"


def test_unknown_dataset_lists_the_known_ones():
    with pytest.raises(SpecError, match="mnist5k"):
        load_dataset("imagenet")


def test_unknown_parameter():
    with pytest.raises(SpecError, match="unknown parameter 'size'"):
        load_dataset("synthetic:size=10")


@pytest.mark.parametrize("name", ["idx", "cifar10"])
def test_folder_loaders_need_a_folder(name):
    with pytest.raises(ValueError, match=f"{name}:DIR"):
        load_dataset(name)


def test_absolute_paths_fix_files_and_folders_and_leave_other_values_alone(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert (
        absolute_paths("svmlight:a.svm,test=sub/b.svm")
        == f"svmlight:{tmp_path}/a.svm,test={tmp_path}/sub/b.svm"
    )
    assert absolute_paths("idx:~/mnist") == f"idx:{Path.home()}/mnist"
    assert absolute_paths("cifar10:/data/c,standardize=off") == "cifar10:/data/c,standardize=off"
    assert absolute_paths("synthetic:n=300,test=100") == "synthetic:n=300,test=100"  # a count, not a file
    assert absolute_paths("mnist5k") == "mnist5k"
