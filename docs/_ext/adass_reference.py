"""Sphinx extension: the command-line and record references, written from the code on every build.

The option tables come from the same ``param`` declarations the ``adass`` parser, the dashboard's
widgets and validation are built from (adass.config sections, adass.cli.command_options), the
plug-in tables from the registries, and the record tables from the record dataclasses of
adass.metrics (each field's ``doc``). The pages include the files written here under
``reference/_generated/``, so a new option, plug-in or column shows up without editing a page.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

__all__ = ["cli_markdown", "records_markdown", "setup"]


def _cell(text: object) -> str:
    """Table-safe text: no line breaks; pipes and angle brackets escaped (``<suite>`` is text, not HTML)."""
    text = " ".join(str(text).split())
    for char in "|<>":
        text = text.replace(char, "\\" + char)
    return text


def _code(text: object) -> str:
    return f"`{text}`" if str(text) not in ("", "None") else ""


def _option_rows(definitions, skip=(), only=None) -> list[str]:  # noqa: ANN001
    import param

    from adass.cli.command_options import LIST_ITEMS
    from adass.config import allowed_text, flag_for, options, registry_for

    rows = []
    for option, p in options(definitions).items():
        if option in skip or (only is not None and option not in only):
            continue
        registry = registry_for(LIST_ITEMS.get(option, option))
        if registry is not None:
            accepts = f"a {registry.kind} spec ([plug-ins](#{registry.kind}-specs))"
        else:
            accepts = allowed_text(p)
        switch = isinstance(p, param.Boolean) and p.default is False
        default = "off (a switch)" if switch else _code(p.default)
        rows.append(f"| `{flag_for(option)}` | {_cell(default)} | {_cell(accepts)} | {_cell(p.doc)} |")
    return rows


def _table(rows: list[str]) -> list[str]:
    return ["| flag | default | accepts | meaning |", "|:--|:--|:--|:--|", *rows, ""]


def cli_markdown() -> str:
    """Every command's flags and every plug-in with its parameters, as MyST markdown."""
    from adass.cli.command_options import (
        BenchOptions,
        CompareOptions,
        DashboardOptions,
        ReproduceOptions,
        TrainOptions,
    )
    from adass.cli.outline import COMMANDS
    from adass.config import SECTIONS, SPEC_REGISTRIES, ClusterSection
    from adass.experiments.bench import SUITES

    out = ["## Commands", "", "| command | what it does |", "|:--|:--|"]
    out += [f"| `adass {name}` | {_cell(text)} |" for name, text in COMMANDS.items()]
    out += [""]
    out += ["## Run options", "",
            "`adass train` takes every run option; `adass compare` takes all but `--sampler` (its "
            "`--samplers` list replaces it). They are grouped as the run's `config.json` groups them.", ""]  # fmt: skip
    for name, section in SECTIONS.items():
        out += [f"### {name}", "", *_table(_option_rows(section))]
    commands = {
        "train": TrainOptions, "compare": CompareOptions, "bench": BenchOptions,
        "reproduce": ReproduceOptions, "dashboard": DashboardOptions,
    }  # fmt: skip
    out += ["## Command options", ""]
    for name, definitions in commands.items():
        out += [f"### adass {name}", ""]
        if name == "bench":
            out += ["`adass bench SUITE`, one of:", "", "| suite | what it measures |", "|:--|:--|"]
            out += [f"| `{suite}` | {_cell(text)} |" for suite, text in sorted(SUITES.items())]
            out += [""]
        rows = _option_rows(definitions)
        if name == "dashboard":
            rows += _option_rows(ClusterSection, only=("scheduler",))
        out += _table(rows)
    out += ["## Plug-in specs", "",
            "A spec is `NAME` or `NAME:key=value,key=value`; parameters left out take their default.", ""]  # fmt: skip
    for option, registry in SPEC_REGISTRIES.items():
        out += [f"### {registry.kind} specs", "", f"Named by `--{option.replace('_', '-')}`.", "",
                "| name | parameter | default | accepts | meaning |", "|:--|:--|:--|:--|:--|"]  # fmt: skip
        for entry in registry:
            out.append(f"| `{entry.name}` |  |  |  | {_cell(entry.doc)} |")
            for key, p in entry.params.items():
                shown = key.upper() if key == "path" else key
                out.append(
                    f"|  | `{shown}` | {_cell(_code(p.default))} | {_cell(p.allowed())} | {_cell(p.doc)} |"
                )
        out += [""]
    return "\n".join(out) + "\n"


def _type_name(kind: object) -> str:
    return kind if isinstance(kind, str) else getattr(kind, "__name__", str(kind))


def records_markdown() -> str:
    """One table per record kind: its file, every column with its type, unit and meaning."""
    from adass.metrics import RECORD_FILES

    out = []
    for kind, filename in RECORD_FILES.items():
        summary = (kind.__doc__ or "").strip().splitlines()[0]
        out += [f"## `{filename}` ({kind.__name__})", "", summary, "",
                "| column | type | meaning |", "|:--|:--|:--|"]  # fmt: skip
        for f in dataclasses.fields(kind):
            out.append(f"| `{f.name}` | `{_type_name(f.type)}` | {_cell(f.metadata.get('doc', ''))} |")
        out += [""]
    return "\n".join(out) + "\n"


def _write(app) -> None:  # noqa: ANN001
    folder = Path(app.srcdir) / "reference" / "_generated"
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in (("cli.md", cli_markdown()), ("records.md", records_markdown())):
        path = folder / name
        if not path.exists() or path.read_text() != text:  # unchanged files keep their pages cached
            path.write_text(text)


def setup(app) -> dict:  # noqa: ANN001
    app.connect("builder-inited", _write)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
