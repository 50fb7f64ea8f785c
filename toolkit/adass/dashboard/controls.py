"""Widgets for every run option, generated from the same ``param`` definitions as the CLI flags.

Each section of :data:`adass.config.SECTIONS` becomes one card of widgets; bounds, choices and the
one-line docs (shown as tooltips) come from the definitions, and :meth:`ConfigControls.config`
validates exactly as ``adass train`` does.
"""

from __future__ import annotations

from typing import Any

import panel as pn
import param

from ..config import SECTIONS, RunConfig, allowed_text, options, registry_for
from .spec_editor import SpecEditor, widget_type

__all__ = ["EDITED", "ConfigControls", "widget_spec"]

#: spec options that also get a name picker and parameter widgets (see :class:`SpecEditor`)
EDITED = ("sampler", "codec", "exchange")


def widget_spec(option: str, p: param.Parameter) -> dict[str, Any]:
    """The ``pn.Param`` widget for one option: numeric inputs (not sliders) for wide bounds, text for specs."""
    css = [f"adass-opt-{option}"]
    registry = registry_for(option)
    doc = p.doc or option
    if registry is not None:
        doc = f"{doc}; one of {'|'.join(registry.names())}"
    elif not isinstance(p, param.String):
        doc = f"{doc}; {allowed_text(p)}"
    spec: dict[str, Any] = {"css_classes": css, "description": doc, "type": widget_type(p)}
    if spec["type"] is pn.widgets.TextInput:
        spec["placeholder"] = "(empty)" if not p.default else str(p.default)
    return spec


class ConfigControls:
    """One fresh instance of every config section and the widgets that edit it.

    Parameters
    ----------
    defaults : dict, optional
        Flat option values to start from (``{"scheduler": "tcp://..."}``); unchecked until
        :meth:`config` is called.
    """

    def __init__(self, defaults: dict[str, Any] | None = None) -> None:
        defaults = dict(defaults or {})
        self.sections: dict[str, param.Parameterized] = {}
        self.panes: dict[str, pn.Param] = {}
        self.editors: dict[str, SpecEditor] = {}
        for name, section in SECTIONS.items():
            mine = {k: defaults[k] for k in options(section) if k in defaults}
            self.sections[name] = section(**mine)
            specs = {option: widget_spec(option, p) for option, p in options(section).items()}
            self.panes[name] = pn.Param(
                self.sections[name], parameters=list(specs), widgets=specs, show_name=False,
                default_layout=pn.Column, sizing_mode="stretch_width",
            )  # fmt: skip
            for option in specs:
                if option in EDITED:
                    self.editors[option] = SpecEditor(self.sections[name], option, registry_for(option))

    def values(self) -> dict[str, Any]:
        """Every option's current value, flat."""
        return {k: getattr(section, k) for section in self.sections.values() for k in options(type(section))}

    def set(self, **values: Any) -> None:
        """Change options (the widgets follow)."""
        for section in self.sections.values():
            mine = {k: v for k, v in values.items() if k in options(type(section))}
            if mine:
                section.param.update(**mine)

    def config(self) -> RunConfig:
        """The validated configuration; raises ``SpecError`` with one line naming the option."""
        return RunConfig.from_flat(**self.values())

    def view(self) -> pn.Column:
        """One collapsible card per section; codec and exchange start collapsed."""
        cards = [
            pn.Card(
                pn.Column(
                    pane,
                    *(e.view() for k, e in self.editors.items() if k in pane.parameters),
                    sizing_mode="stretch_width",
                ),  # fmt: skip
                title=name,
                collapsed=name in ("codec", "exchange"),
                sizing_mode="stretch_width",
                margin=(2, 0),
            )  # fmt: skip
            for name, pane in self.panes.items()
        ]
        return pn.Column(*cards, sizing_mode="stretch_width")

    def set_disabled(self, disabled: bool) -> None:
        """Freeze the widgets while a run goes on (its configuration is fixed at Start)."""
        for pane in self.panes.values():
            for widget in pane.layout.select(pn.widgets.Widget):
                widget.disabled = disabled
        for editor in self.editors.values():
            for widget in editor.widgets():
                widget.disabled = disabled
