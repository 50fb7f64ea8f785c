"""Widgets for a plug-in spec option: the registered names to pick from and the chosen one's parameters.

The widgets come from the registry's own declarations (:meth:`Entry.parameterized`), the same ones the
command line validates against, and they write the spec text back into the option (:meth:`Entry.spec`).
The text stays editable: specs beyond one entry (``randk:ratio=0.01+qsgd:bits=8``, ``ef(qsgd)``) are
typed there, and the widgets then step aside.
"""

from __future__ import annotations

from typing import Any

import panel as pn
import param

from ..options import AutoInteger
from ..registry import Entry, Registry, SpecError

__all__ = ["SpecEditor", "widget_type"]


def widget_type(p: param.Parameter) -> type[pn.widgets.Widget]:
    """The Panel widget for one parameter: numeric inputs (not sliders) for wide bounds, text otherwise."""
    if isinstance(p, param.Boolean):
        return pn.widgets.Checkbox
    if isinstance(p, param.Integer):
        return pn.widgets.IntInput
    if isinstance(p, param.Number):
        return pn.widgets.FloatInput
    if isinstance(p, param.Selector):
        return pn.widgets.Select
    return pn.widgets.TextInput


def _widget(p: param.Parameter) -> dict[str, Any]:
    """``pn.Param``'s widget entry for one parameter, its doc as a tooltip where the widget has one."""
    kind = widget_type(p)
    return {"type": kind, **({"description": p.doc} if p.doc and "description" in kind.param else {})}


class SpecEditor:
    """A name picker and parameter widgets that edit the spec option ``option`` of ``section``.

    Parameters
    ----------
    section : param.Parameterized
        The config section holding the option (a string parameter).
    option : str
        The option's name (``"sampler"``, ``"codec"``, ``"exchange"``).
    registry : Registry
        The plug-ins the option names.
    """

    def __init__(self, section: param.Parameterized, option: str, registry: Registry) -> None:
        self.section, self.option, self.registry = section, option, registry
        self.entry: Entry | None = None
        self.values: param.Parameterized | None = None
        self._busy = False
        self.name = pn.widgets.Select(
            label=f"{option} (registered)", options=registry.names(), css_classes=[f"adass-pick-{option}"],
            description=f"the registered {registry.kind}s; their parameters appear below",
        )  # fmt: skip
        self.params = pn.Column(sizing_mode="stretch_width", css_classes=[f"adass-params-{option}"])
        self.name.param.watch(self._picked, "value")
        section.param.watch(lambda _event: self._typed(), option)
        self._typed()

    def _typed(self) -> None:
        """The option's text changed: the widgets follow when it names one registered entry."""
        if self._busy:
            return
        try:
            entry, values = self.registry.resolve(getattr(self.section, self.option))
        except SpecError:
            self.entry = self.values = None
            self.params.objects = [pn.pane.Markdown("*a spec beyond one entry: edit it as text above*")]
            return
        self.entry = entry
        # a count or ``auto`` is edited as text in a text box
        texts = {k for k, p in entry.params.items() if isinstance(p.definition, AutoInteger)}
        values = {k: str(v) if k in texts else v for k, v in values.items()}
        self.values = entry.parameterized()(**values)
        self.values.param.watch(self._edited, list(entry.params))
        self._busy = True
        try:
            self.name.value = entry.name
        finally:
            self._busy = False
        widgets = {key: _widget(self.values.param[key]) for key in entry.params}
        self.params.objects = (
            [
                pn.Param(
                    self.values,
                    parameters=list(entry.params),
                    widgets=widgets,
                    show_name=False,
                    default_layout=pn.Column,
                    sizing_mode="stretch_width",
                )
            ]  # fmt: skip
            if entry.params
            else []
        )

    def _picked(self, event: Any) -> None:
        """Another name was picked: the option becomes that entry with its defaults."""
        if not self._busy:
            self.section.param.update(**{self.option: self.registry.entry(event.new).spec({})})

    def _edited(self, *events: Any) -> None:
        """A parameter widget changed: write the spec back (the widgets stay as they are)."""
        assert self.entry is not None and self.values is not None
        values = {key: getattr(self.values, key) for key in self.entry.params}
        self._busy = True
        try:
            self.section.param.update(**{self.option: self.entry.spec(values)})
        finally:
            self._busy = False

    def widgets(self) -> list[pn.widgets.Widget]:
        """Every widget of the editor (to freeze them while a run goes on)."""
        return [self.name, *self.params.select(pn.widgets.Widget)]

    def view(self) -> pn.Column:
        """The picker above the parameter widgets."""
        return pn.Column(self.name, self.params, sizing_mode="stretch_width")
