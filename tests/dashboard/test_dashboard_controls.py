"""Widgets for every run option, from the same definitions as the CLI, validating as ``adass train`` does."""

import param
import pytest

from adass.config import SECTIONS, options
from adass.dashboard import ConfigControls
from adass.registry import SpecError


def test_every_option_has_a_widget_with_its_bounds_and_doc():
    controls = ConfigControls()
    for name, section in SECTIONS.items():
        pane = controls.panes[name]
        for option, p in options(section).items():
            (widget,) = [w for w in pane.layout if option in " ".join(getattr(w, "css_classes", []))]
            assert p.doc.split(" (")[0] in widget.description
            if isinstance(p, (param.Integer, param.Number)):
                assert (widget.start, widget.end) == p.bounds
            if isinstance(p, param.Selector):
                assert list(widget.options) == list(p.objects)
    controls.set(epochs=3, sampler="adass:eps=0.2", workers=2)
    config = controls.config()
    assert (config.optim.epochs, config.sampler.sampler, config.cluster.workers) == (3, "adass:eps=0.2", 2)
    controls.set(sampler="bogus")
    with pytest.raises(SpecError, match="--sampler"):
        controls.config()
