"""Widgets for every run option, from the same definitions as the CLI, validating as ``adass train`` does."""

import panel as pn
import param
import pytest
from bokeh.document import Document

from adass.config import SECTIONS, allowed_text, options
from adass.dashboard import ConfigControls
from adass.dashboard.controls import MORE
from adass.registry import SpecError


def test_every_option_has_a_widget_with_its_bounds_and_doc():
    controls = ConfigControls()
    for section in SECTIONS.values():
        for option, p in options(section).items():
            widget = controls.widgets[option]
            assert f"adass-opt-{option}" in widget.css_classes
            told = (
                widget.description if "description" in widget.param else widget.label
            )  # a checkbox: its label
            assert p.doc.split(" (")[0] in told
            if isinstance(p, (param.Integer, param.Number)):
                assert allowed_text(p) in told  # the bounds are said, and checked by the page, not the box
            if isinstance(p, param.Selector):
                assert list(widget.options) == list(p.objects)
    controls.set(epochs=3, sampler="adass:eps=0.2", workers=2)
    assert controls.widgets["epochs"].value == 3  # the boxes follow the options
    config = controls.config()
    assert (config.optim.epochs, config.sampler.sampler, config.cluster.workers) == (3, "adass:eps=0.2", 2)
    controls.set(sampler="bogus")
    with pytest.raises(SpecError, match="--sampler"):
        controls.config()


@pytest.mark.parametrize(
    ("option", "typed"), [("epochs", -3), ("workers", 1000), ("batch_size", 0), ("lr", None)]
)
def test_a_number_outside_its_bounds_is_named_beside_its_box_and_refused_at_start(option, typed):
    controls = ConfigControls()
    before = controls.values()[option]
    controls.widgets[option].value = typed
    assert controls.widgets[option].value == typed  # kept as typed, not snapped back
    (section,) = [name for name, pane in controls.panes.items() if controls.widgets[option] in pane.objects]
    note = controls.notes[section]
    assert note.visible and note.object.startswith(f"--{option.replace('_', '-')}:")
    assert controls.values()[option] == before  # the option keeps its allowed value...
    with pytest.raises(SpecError, match=f"--{option.replace('_', '-')}"):
        controls.config()  # ...but Start refuses instead of running it
    controls.widgets[option].value = before
    assert not note.visible and controls.config()


def test_spec_options_offer_the_registered_names_and_their_parameters():
    from adass.codecs import CODECS
    from adass.exchange import EXCHANGES
    from adass.sampling import SAMPLERS

    controls = ConfigControls()
    for option, registry in (("sampler", SAMPLERS), ("codec", CODECS), ("exchange", EXCHANGES)):
        assert controls.editors[option].name.options == registry.names()
    sampler = controls.editors["sampler"]
    sampler.name.value = "adass"  # picked: the entry with its defaults
    assert controls.values()["sampler"] == "adass"
    eps = [w for w in sampler.widgets() if w.name == "Eps"]
    assert len(eps) == 1 and (eps[0].start, eps[0].end) == (0.0, 1.0)  # the CLI's bounds
    sampler.values.eps = 0.3  # a parameter widget writes the spec back
    assert controls.values()["sampler"] == "adass:eps=0.3"
    final = [w for w in sampler.widgets() if w.name == "Final"]  # a count or auto: a text box
    assert len(final) == 1 and final[0].value == "auto"
    final[0].value = "2"
    assert controls.values()["sampler"] == "adass:eps=0.3,final=2"
    controls.set(sampler="adass:final=0")  # typed text shows in the box
    assert [w.value for w in controls.editors["sampler"].widgets() if w.name == "Final"] == ["0"]
    controls.set(codec="qsgd:bits=4")  # typed text moves the widgets
    assert controls.editors["codec"].name.value == "qsgd" and controls.editors["codec"].values.bits == 4
    controls.set(codec="randk:ratio=0.01+qsgd:bits=8", workers=2)  # beyond one entry: text only
    assert controls.editors["codec"].values is None
    assert controls.config().codec.codec == "randk:ratio=0.01+qsgd:bits=8"
    controls.set_disabled(True)
    assert all(w.disabled for w in controls.editors["exchange"].widgets())


def _sent(doc: Document, option: str) -> bool:
    """Whether ``option``'s box is among the models a served page holds."""
    return any(f"adass-opt-{option}" in (getattr(m, "css_classes", None) or []) for m in doc.models)


def test_rarely_changed_options_are_sent_to_the_page_when_their_card_is_opened():
    controls = ConfigControls()
    doc = Document()
    doc.add_root(controls.view().get_root(doc))
    assert _sent(doc, "epochs") and _sent(doc, "workers")
    assert not _sent(doc, "dask_dashboard") and not _sent(doc, "codec")  # out of sight: not built yet
    (more,) = [
        card for card in controls.panes["cluster"].select(pn.Card) if card.title == "more cluster options"
    ]
    more.collapsed = False
    assert all(_sent(doc, option) for option in MORE["cluster"])
    controls.widgets["workers"].value = 2
    controls.widgets["dask_dashboard"].value = True  # the box writes its option like any other
    assert controls.config().cluster.dask_dashboard
