"""Widgets for every run option, generated from the same ``param`` definitions as the CLI flags.

Each section of :data:`adass.config.SECTIONS` becomes one card of widgets; bounds, choices and the
one-line docs (shown as tooltips) come from the definitions, and :meth:`ConfigControls.config`
validates exactly as ``adass train`` does.
"""

from __future__ import annotations

import html
from functools import partial
from typing import Any

import panel as pn
import param

from ..config import SECTIONS, RunConfig, allowed_text, flag_for, options, registry_for
from ..options import check_value
from ..registry import SpecError
from .spec_editor import SpecEditor, widget_type

__all__ = ["COLLAPSED", "EDITED", "MORE", "ConfigControls", "lazy_card", "option_widget"]

#: spec options that also get a name picker and parameter widgets (see :class:`SpecEditor`)
EDITED = ("sampler", "codec", "exchange")
#: options a first run rarely changes: each section's card keeps them in a collapsed "more" card
MORE = {
    "data": ("data_to_workers", "train_rows"),
    "optim": ("weight_decay", "schedule", "max_nonfinite", "diverge_factor", "chance_epochs"),
    "cluster": ("timeout_s", "bind", "threads", "detect_s", "dask_dashboard", "tls_ca", "tls_cert", "tls_key",
                "straggler", "restarts", "commit_steps", "min_workers", "max_workers", "checkpoint", "checkpoint_writer"),
}  # fmt: skip
#: sections whose card starts collapsed
COLLAPSED = ("codec", "exchange")


def option_widget(option: str, p: param.Parameter, value: Any) -> pn.widgets.Widget:
    """The widget for one run option: numeric inputs (not sliders), text for specs, its doc as a tooltip.

    Number boxes take any number: one outside the option's bounds is kept as typed and named in a
    message beside the box (see :class:`ConfigControls`), instead of snapping back without a word.
    """
    kind = widget_type(p)
    registry = registry_for(option)
    doc = p.doc or option
    if registry is not None:
        doc = f"{doc}; one of {'|'.join(registry.names())}"
    elif not isinstance(p, param.String):
        doc = f"{doc}; {allowed_text(p)}"
    label = p.label or option
    spec: dict[str, Any] = {"label": label, "value": value, "css_classes": [f"adass-opt-{option}"],
                            "sizing_mode": "stretch_width"}  # fmt: skip
    if "description" in kind.param:
        spec["description"] = doc
    else:  # a checkbox has no tooltip: its label says it
        spec["label"] = f"{label}: {doc}"
    if kind is pn.widgets.TextInput:
        spec["placeholder"] = "(empty)" if not p.default else str(p.default)
    if kind is pn.widgets.Select:
        spec["options"] = list(p.objects)
    return kind(**spec)


class ConfigControls:
    """One fresh instance of every config section and the widgets that edit it.

    A widget writes its option when the value it holds is allowed; a value that is not (``epochs -3``,
    ``batch size 0``) stays in the box, its one-line reason shows atop the box's card, and
    :meth:`config` refuses with that line, so Start never runs the previous value.

    Parameters
    ----------
    defaults : dict, optional
        Flat option values to start from (``{"scheduler": "tcp://..."}``); unchecked until
        :meth:`config` is called.
    """

    def __init__(self, defaults: dict[str, Any] | None = None) -> None:
        defaults = dict(defaults or {})
        self.sections: dict[str, param.Parameterized] = {}
        self.widgets: dict[str, pn.widgets.Widget] = {}
        self.panes: dict[str, pn.Column] = {}
        self.editors: dict[str, SpecEditor] = {}
        self.problems: dict[str, str] = {}  # option -> why the value in its box is not taken
        self.notes: dict[str, pn.pane.HTML] = {}  # section -> the reasons of its boxes, atop its card
        for name, section in SECTIONS.items():
            mine = {k: defaults[k] for k in options(section) if k in defaults}
            self.sections[name] = section(**mine)
            self.notes[name] = pn.pane.HTML("", visible=False, css_classes=["adass-invalid", f"adass-invalid-{name}"],
                                            styles={"color": "#b00020", "font-size": "12px"}, margin=(0, 10))  # fmt: skip
            column: list = [self.notes[name]]
            more: list = []
            for option, p in options(section).items():
                widget = option_widget(option, p, getattr(self.sections[name], option))
                widget.param.watch(partial(self._typed, name, option), "value")
                self.sections[name].param.watch(partial(self._follow, option), option)
                self.widgets[option] = widget
                place = more if option in MORE.get(name, ()) else column
                place.append(widget)
                if option in EDITED:
                    self.editors[option] = SpecEditor(self.sections[name], option, registry_for(option))
                    place.append(self.editors[option].view())
            if more:
                column.append(lazy_card(f"more {name} options", pn.Column(*more, sizing_mode="stretch_width"),
                                        collapsed=True, css_classes=[f"adass-more-{name}"]))  # fmt: skip
            self.panes[name] = pn.Column(*column, sizing_mode="stretch_width")

    def _typed(self, section: str, option: str, event: Any) -> None:
        """A box changed: take the value if the option allows it, otherwise say why beside the box."""
        p = options(type(self.sections[section]))[option]
        try:
            value = event.new
            if isinstance(p, param.Number) and value is None:
                raise SpecError(f"{flag_for(option)}: the box is empty; expected {allowed_text(p)}")
            value = check_value(p, value, flag_for(option))
            self.sections[section].param.update(**{option: value})
        except (SpecError, ValueError) as err:
            text = str(err) if isinstance(err, SpecError) else f"{flag_for(option)}: {event.new!r}: {err}"
            self.problems[option] = text
        else:
            self.problems.pop(option, None)
        mine = [self.problems[k] for k in options(type(self.sections[section])) if k in self.problems]
        self.notes[section].param.update(object="<br>".join(map(html.escape, mine)), visible=bool(mine))

    def _follow(self, option: str, event: Any) -> None:
        """The option changed (set in code, or by a spec editor): its box shows the new value."""
        widget = self.widgets[option]
        if widget.value != event.new:
            widget.value = event.new

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
        """The validated configuration; raises ``SpecError`` with one line naming the option (a box
        holding a value the option does not allow first)."""
        if self.problems:
            raise SpecError(next(iter(self.problems.values())))
        return RunConfig.from_flat(**self.values())

    def view(self) -> pn.Column:
        """One collapsible card per section (those of :data:`COLLAPSED` start collapsed), the rarely
        changed options of each in a collapsed card of its own (:data:`MORE`)."""
        cards = [lazy_card(name, pane, collapsed=name in COLLAPSED, css_classes=[f"adass-section-{name}"])
                 for name, pane in self.panes.items()]  # fmt: skip
        return pn.Column(*cards, sizing_mode="stretch_width")

    def set_disabled(self, disabled: bool) -> None:
        """Freeze the widgets while a run goes on (its configuration is fixed at Start)."""
        for widget in self.widgets.values():
            widget.disabled = disabled
        for editor in self.editors.values():
            for widget in editor.widgets():
                widget.disabled = disabled


def lazy_card(title: str, body: pn.viewable.Viewable, collapsed: bool, css_classes: list[str]) -> pn.Card:
    """A card whose body is sent to the browser when it is first expanded.

    A collapsed Panel card still builds every model inside it; a page of thirty-odd option boxes
    costs the server most of its build time, so what is out of sight waits until it is opened. The
    widgets themselves exist from the start (they hold the options' values either way).
    """
    if not collapsed:
        return pn.Card(body, title=title, sizing_mode="stretch_width", margin=(2, 0), css_classes=css_classes)
    card = pn.Card(pn.pane.HTML("", height=0, margin=0), title=title, collapsed=True,
                   sizing_mode="stretch_width", margin=(2, 0), css_classes=css_classes)  # fmt: skip

    def opened(event: Any) -> None:
        if not event.new and card.objects[0] is not body:
            card.objects = [body]

    card.param.watch(opened, "collapsed")
    return card
