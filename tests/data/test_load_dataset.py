"""``load_dataset`` and the registry entries: names, canonical specs and unknown datasets."""

from __future__ import annotations

import pytest

from adass.data import DATASETS, load_dataset
from adass.registry import SpecError


def test_every_loader_is_registered():
    assert DATASETS.names() == ["cifar10", "idx", "mnist5k", "svmlight", "synthetic"]


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
