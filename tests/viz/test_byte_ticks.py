"""Byte ticks read as one scale: neighbours never print the same text, fractions of a byte stay blank."""

import json
import shutil
import subprocess

import pytest

from adass.viz.style import _BYTES_JS

NODE = shutil.which("node")


def _labels(*axes: list[float]) -> list[list[str]]:
    """The formatter's labels for each axis of ticks, as BokehJS calls it (``tick``, ``index``, ``ticks``)."""
    script = f"const f = new Function('tick', 'index', 'ticks', {json.dumps(_BYTES_JS)});\n"
    script += (
        f"console.log(JSON.stringify({json.dumps(list(axes))}.map(ts => ts.map((t, i) => f(t, i, ts)))));"
    )
    return json.loads(subprocess.run([NODE, "-e", script], capture_output=True, text=True, check=True).stdout)


@pytest.mark.skipif(NODE is None, reason="needs node to run the formatter's JavaScript")
def test_byte_ticks_are_distinct_and_share_one_unit():
    close, tiny, wide, fine = _labels(
        [1.2e6, 1.25e6, 1.3e6], [0, 0.25, 0.5, 0.75, 1], [0, 2e5, 4e5], [1e6, 1.0001e6, 1.0002e6]
    )
    assert close == ["1.20 MB", "1.25 MB", "1.30 MB"]
    assert tiny == ["0 B", "", "", "", "1 B"]  # an empty view's axis: no "0 B 0 B 0 B"
    assert wide == ["0 kB", "200 kB", "400 kB"]
    assert fine == ["1000.0 kB", "1000.1 kB", "1000.2 kB"]  # a unit fine enough to tell them apart
