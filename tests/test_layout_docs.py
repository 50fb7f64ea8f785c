"""The site's layout page (docs/reference/layout.md) and docs/architecture.md name every folder of the
package as it is."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "toolkit" / "adass"
FOLDERS = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists())


LAYOUT = "docs/reference/layout.md"


def _layout_block() -> str:
    page = (ROOT / LAYOUT).read_text()
    return page[page.index("```") : page.index("```", page.index("```") + 3)]


@pytest.mark.parametrize("document", [LAYOUT, "docs/architecture.md"])
def test_every_package_folder_is_named(document):
    text = _layout_block() if document == LAYOUT else (ROOT / document).read_text()
    missing = [name for name in FOLDERS if f"{name}/" not in text]
    assert not missing, f"{document} does not name {missing}"


def test_the_layout_names_no_folder_that_is_gone():
    named = {word.rstrip("/:,") for word in _layout_block().split() if word.endswith(("/", "/:"))}
    top_level = {"toolkit/adass", "dashboards", "tutorials", "data", "docs", "tests", "scripts"}
    in_docs = {"_ext", "figures", "plots"}
    nested = {"bench", "reproduce", "cluster", "ring", "transport", "link", "kernels"}
    for name in named:
        if name in in_docs:
            assert (ROOT / "docs" / name).is_dir(), f"{LAYOUT} names docs/{name}/, which is not a folder"
            continue
        assert name in FOLDERS or name in top_level or name in nested, (
            f"{LAYOUT} names {name}/, which is not a folder"
        )
        if name in nested:
            assert any(p.is_dir() for p in PACKAGE.rglob(name)), (
                f"{LAYOUT} names {name}/, which is not a folder"
            )
