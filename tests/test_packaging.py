"""environment.yml stays in step with pyproject.toml; the README shows the two set-up commands."""

import re
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
CONDA_NAMES = {"torch": "pytorch", "dask[distributed]": "dask"}


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~ ;]", requirement, maxsplit=1)[0].strip().lower()


def test_environment_yml_lists_every_dependency_of_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = project["dependencies"] + project["optional-dependencies"]["dev"]
    env_text = (ROOT / "environment.yml").read_text()
    listed = {m.group(1).lower() for m in re.finditer(r"^\s*-\s+([A-Za-z0-9_.\-]+)", env_text, re.M)}
    for requirement in wanted:
        name = _name(requirement)
        assert CONDA_NAMES.get(name, name) in listed, f"{name} missing from environment.yml"
        lower_bound = re.search(r">=\s*([0-9.]+)", requirement)
        if lower_bound:
            conda = CONDA_NAMES.get(name, name)
            assert re.search(rf"-\s+{re.escape(conda)}>={re.escape(lower_bound.group(1))}\b", env_text), name


def test_torch_is_declared_as_a_range_that_admits_the_pinned_build():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    torch_req = next(r for r in project["dependencies"] if _name(r) == "torch")
    assert torch_req.replace(" ", "") == "torch>=2.2"
    assert "TORCH ?= torch==2.13.0" in (ROOT / "Makefile").read_text()


def test_readme_opens_with_the_two_commands():
    head = (ROOT / "README.md").read_text().split("\n## ")[0]
    assert "make demo" in head and "make test" in head
