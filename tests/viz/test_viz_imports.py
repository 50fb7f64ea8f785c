"""``adass.viz`` is views only: importing it starts no page, thread, cluster or training code."""

import ast
import subprocess
import sys
from pathlib import Path

import adass.viz

APP_MODULES = (
    "panel",
    "threading",
    "queue",
    "adass.dashboard",
    "adass.runtime.cluster",
    "adass.runtime",
    "adass.engine",
)


def imported_names(path: Path) -> set[str]:
    """Absolute module names ``path`` imports (relative imports resolved inside ``adass.viz``)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = ["adass", "viz"][: 2 - node.level + 1] if node.level else []
            names.add(".".join([*base, *([node.module] if node.module else [])]))
    return names


def test_no_view_module_imports_the_app():
    for path in Path(adass.viz.__file__).parent.glob("*.py"):
        wrong = {n for n in imported_names(path) if n.startswith(APP_MODULES)}
        assert not wrong, f"{path.name} imports {sorted(wrong)}"


def test_importing_the_views_loads_none_of_the_app():
    code = "import sys, adass.viz; print(' '.join(m for m in sys.modules if m.startswith('adass.')))"
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert not [m for m in loaded.stdout.split() if m.startswith(APP_MODULES)]
