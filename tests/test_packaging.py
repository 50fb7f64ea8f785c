"""Packaging: every import is declared, environment.yml stays in step with pyproject.toml, and a
wheel installed on its own trains on the bundled data and serves the dashboard."""

from __future__ import annotations

import ast
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
CONDA_NAMES = {"torch": "pytorch", "dask[distributed]": "dask"}
# a requirement that pulls in more than one importable distribution
PROVIDES = {"dask[distributed]": {"dask", "distributed"}}


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~ ;]", requirement, maxsplit=1)[0].strip().lower()


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _declared(requirements: list[str]) -> set[str]:
    names: set[str] = set()
    for requirement in requirements:
        name = _name(requirement)
        names |= PROVIDES.get(name, {name})
    return {n.replace("_", "-") for n in names}


def _imports(paths: list[Path], module_level_only: bool = False) -> set[str]:
    """Top-level names of the absolute imports in ``paths`` (only those at module level if asked)."""
    found: set[str] = set()
    for path in paths:
        tree = ast.parse(path.read_text(), filename=str(path))
        nodes = tree.body if module_level_only else ast.walk(tree)
        for node in nodes:
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return found


def _distributions(modules: set[str], local: set[str]) -> dict[str, str]:
    """Third-party module -> the distribution that provides it (stdlib and local modules left out)."""
    providers = metadata.packages_distributions()
    third_party = modules - set(sys.stdlib_module_names) - local - {"__future__", "adass"}
    # an optional module not installed here (dask_cuda) goes by its own name, as its distribution does
    return {m: providers.get(m, [m])[0].lower().replace("_", "-") for m in sorted(third_party)}


def _undeclared(modules: set[str], declared: set[str], local: set[str] = frozenset()) -> list[str]:
    return [f"{m} ({d})" for m, d in _distributions(modules, set(local)).items() if d not in declared]


def test_what_the_package_imports_at_module_level_is_a_dependency():
    sources = sorted((ROOT / "toolkit" / "adass").rglob("*.py"))
    declared = _declared(_project()["dependencies"])
    assert not _undeclared(_imports(sources, module_level_only=True), declared)


def test_every_import_of_the_package_is_a_dependency_or_an_extra():
    project = _project()
    declared = _declared(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        declared |= _declared(extra)
    sources = sorted((ROOT / "toolkit" / "adass").rglob("*.py"))
    assert not _undeclared(_imports(sources), declared)


def test_what_the_tests_import_is_declared_for_dev():
    project = _project()
    declared = _declared(project["dependencies"] + project["optional-dependencies"]["dev"])
    sources = sorted((ROOT / "tests").rglob("*.py"))
    local = {p.stem for p in sources} | {"tests"}
    # notebook tests skip without their tools, but then nothing checks the notebooks: declare them
    text = "\n".join(p.read_text() for p in sources)
    skipped = set(re.findall(r"importorskip\(\"([A-Za-z0-9_]+)\"\)", text))
    assert not _undeclared(_imports(sources) | skipped, declared, local)


def test_what_the_tutorials_import_is_declared_for_tutorials():
    project = _project()
    declared = _declared(project["dependencies"] + project["optional-dependencies"]["tutorials"])
    assert not _undeclared(_imports(sorted((ROOT / "tutorials").glob("*.py"))), declared)


def test_environment_yml_lists_every_dependency_and_extra_of_pyproject():
    project = _project()
    wanted = project["dependencies"] + [
        r for extra in project["optional-dependencies"].values() for r in extra
    ]
    env_text = (ROOT / "environment.yml").read_text()
    listed = {m.group(1).lower() for m in re.finditer(r"^\s*-\s+([A-Za-z0-9_.\-]+)", env_text, re.M)}
    for requirement in wanted:
        name = _name(requirement)
        conda = CONDA_NAMES.get(name, name)
        assert conda in listed, f"{name} missing from environment.yml"
        lower_bound = re.search(r">=\s*([0-9.]+)", requirement)
        if lower_bound:
            assert re.search(rf"-\s+{re.escape(conda)}>={re.escape(lower_bound.group(1))}\b", env_text), name


def test_environment_yml_takes_everything_from_conda_forge():
    env_text = (ROOT / "environment.yml").read_text()
    channels = re.search(r"^channels:\n((?:\s+-\s+\S+\n)+)", env_text, re.M)
    assert channels is not None
    names = re.findall(r"-\s+(\S+)", channels.group(1))
    assert names[0] == "conda-forge" and "pytorch" not in names


def test_torch_is_declared_as_a_range_that_admits_the_pinned_build():
    torch_req = next(r for r in _project()["dependencies"] if _name(r) == "torch")
    assert torch_req.replace(" ", "") == "torch>=2.2"
    assert "TORCH ?= torch==2.13.0" in (ROOT / "Makefile").read_text()


def test_readme_opens_with_the_two_commands():
    head = (ROOT / "README.md").read_text().split("\n## ")[0]
    assert "make demo" in head and "make test" in head


# --- a wheel, installed on its own -------------------------------------------------------------


def _build_wheel(tmp_path: Path) -> Path:
    """Build the wheel from a copy of the sources (the checkout gets no build/ or egg-info)."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(
        ROOT / "toolkit", src / "toolkit", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-index", "--no-build-isolation",
         "--wheel-dir", str(dist), str(src)],
        check=True, timeout=600,
    )  # fmt: skip
    (wheel,) = dist.glob("adass-*.whl")
    return wheel


def _venv_with_wheel(tmp_path: Path, wheel: Path) -> Path:
    """A fresh venv holding only the wheel; torch and the other dependencies are borrowed from this
    interpreter's site-packages, appended after the venv's own (so the wheel's adass comes first, and
    an editable install's path hook there is never run)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
    borrowed = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(purelib) / "borrowed_dependencies.pth").write_text("\n".join(sorted(borrowed)) + "\n")
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--ignore-installed",
         str(wheel)],
        check=True, timeout=300, env=_clean_env(),
    )  # fmt: skip
    return venv


def _clean_env() -> dict[str, str]:
    """This environment without anything that would point Python or adass at the source tree."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ADASS_DATA_DIR", "PYTHONHOME")}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _fetch_page(process: subprocess.Popen, timeout_s: float) -> str:
    """Wait for the server's address line, then fetch the page over loopback."""
    deadline = time.monotonic() + timeout_s
    for line in process.stdout:
        if line.startswith("adass dashboard: http://"):
            url = line.split(": ", 1)[1].strip()
            break
        assert time.monotonic() < deadline, "the dashboard did not print its address in time"
    else:
        pytest.fail(f"adass dashboard exited with {process.wait()} before serving")
    while True:
        try:
            with urllib.request.urlopen(url, timeout=60) as response:
                return response.read().decode()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@pytest.fixture(scope="module")
def installed_wheel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp_path = tmp_path_factory.mktemp("wheel")
    wheel = _build_wheel(tmp_path)
    return wheel, _venv_with_wheel(tmp_path, wheel)


def test_the_wheel_carries_the_bundled_digits(installed_wheel):
    wheel, _ = installed_wheel
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "adass/data/mnist5k.npz" in names


def test_an_installed_wheel_trains_and_serves_from_its_own_files(installed_wheel, tmp_path):
    _, venv = installed_wheel
    env, cwd = _clean_env(), tmp_path  # not the checkout: nothing resolves against the source tree
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import adass, adass.data, adass.dashboard; "
         "print(adass.__file__); print(adass.data.data_dir()); print(adass.dashboard.__file__)"],
        check=True, capture_output=True, text=True, cwd=cwd, env=env, timeout=300,
    ).stdout.split()  # fmt: skip
    assert all(Path(p).resolve().is_relative_to(venv.resolve()) for p in where), where

    out = tmp_path / "run"
    train = subprocess.run(
        [str(venv / "bin" / "adass"), "train", "--data", "mnist5k", "--model", "logreg", "--epochs", "1",
         "--out", str(out), "--quiet"],
        capture_output=True, text=True, cwd=cwd, env=env, timeout=600,
    )  # fmt: skip
    assert train.returncode == 0, train.stderr
    assert (out / "config.json").is_file() and any(out.glob("*.parquet"))

    port = _free_port()
    server = subprocess.Popen(
        [str(venv / "bin" / "adass"), "dashboard", "--port", str(port), "--runs", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd, env=env,
    )  # fmt: skip
    try:
        page = _fetch_page(server, timeout_s=300)
        assert "adass dashboard" in page and "bokeh" in page.lower()
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        server.stdout.close()
