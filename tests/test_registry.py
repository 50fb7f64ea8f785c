"""Spec parsing and validation of plug-in parameters."""

import pytest

from adass.registry import Param, Registry, SpecError, parse_spec


def make_registry() -> Registry:
    reg = Registry("thing")

    @reg.register(
        "alpha", ratio=Param(0.5, "a share", low=0.0, high=1.0), bits=Param(8, "width", low=1, high=16)
    )
    def alpha(ratio, bits, **context):
        return ("alpha", ratio, bits, context)

    @reg.register("files", path=Param("", "a folder"), mode=Param("a", "mode", choices=("a", "b")))
    def files(path, mode):
        return (path, mode)

    return reg


def test_parse_spec_with_arguments_and_positional_path():
    assert parse_spec("qsgd:bits=4,bucket=512").args == {"bits": "4", "bucket": "512"}
    spec = parse_spec("svmlight:/tmp/a.txt,test=/tmp/b.txt")
    assert spec.args == {"path": "/tmp/a.txt", "test": "/tmp/b.txt"}
    assert str(spec) == "svmlight:/tmp/a.txt,test=/tmp/b.txt"


def test_build_converts_types_and_passes_context():
    reg = make_registry()
    assert reg.build("alpha:ratio=0.25,bits=4", n=3) == ("alpha", 0.25, 4, {"n": 3})
    assert reg.build("alpha") == ("alpha", 0.5, 8, {})
    assert reg.build("files:/data,mode=b") == ("/data", "b")


@pytest.mark.parametrize(
    "spec, words",
    [
        ("beta", ["'beta'", "alpha|files"]),
        ("alpha:ratio=2", ["ratio=2", "[0, 1]"]),
        ("alpha:bits=4.5", ["bits=4.5", "integer"]),
        ("alpha:colour=red", ["'colour'", "ratio, bits"]),
        ("alpha:ratio", ["key=value"]),
        ("files:x,mode=c", ["mode=c", "a|b"]),
        ("", ["empty"]),
    ],
)
def test_bad_specs_name_the_value_and_what_is_allowed(spec, words):
    with pytest.raises(SpecError) as err:
        make_registry().build(spec)
    message = str(err.value)
    assert "\n" not in message
    for word in words:
        assert word in message


def test_names_and_help_list_every_entry():
    reg = make_registry()
    assert reg.names() == ["alpha", "files"]
    text = reg.help()
    assert "ratio=0.5" in text and "bits=8" in text and "one of a|b" in text and "PATH" in text
    assert reg.entry("files").usage() == "files:PATH,mode=a"


def test_a_plug_in_entry_gives_widgets_panel_can_render():
    import panel as pn
    import param

    from adass.sampling import SAMPLERS

    entry = SAMPLERS.entry("adass")
    editor = SAMPLERS.editor("adass:eps=0.3,lipschitz=empirical")
    # what the spec leaves out is the registered default
    assert isinstance(editor, param.Parameterized) and (editor.eps, editor.lipschitz, editor.warmup) == (
        0.3,
        "empirical",
        entry.params["warmup"].default,
    )
    pane = pn.Param(editor, parameters=list(entry.params))
    widgets = {w.name: w for w in pane.layout if isinstance(w, pn.widgets.Widget) and w.name}
    assert sorted(widgets) == sorted(editor.param[k].label for k in entry.params)
    eps, lipschitz = widgets[editor.param["eps"].label], widgets[editor.param["lipschitz"].label]
    assert (eps.value, eps.start, eps.end) == (0.3, 0.0, 1.0)
    assert isinstance(lipschitz, pn.widgets.Select) and lipschitz.value == "empirical"
    assert list(lipschitz.options) == ["auto", "exact", "feature", "const", "empirical"]
    # values edited in the widgets make a spec that validates like a typed one
    editor.param.update(eps=0.5, refresh=3)
    spec = entry.spec(editor.param.values())
    assert spec == "adass:eps=0.5,lipschitz=empirical,refresh=3"
    assert SAMPLERS.resolve(spec)[1] == {
        **SAMPLERS.resolve("adass")[1],
        "eps": 0.5,
        "lipschitz": "empirical",
        "refresh": 3,
    }


def test_every_registered_plug_in_gives_a_parameterized_class():
    from adass.config import SPEC_REGISTRIES

    for registry in SPEC_REGISTRIES.values():
        for entry in registry:
            cls = entry.parameterized()
            instance = cls()
            assert {k: getattr(instance, k) for k in entry.params} == {
                k: p.default for k, p in entry.params.items()
            }
            assert registry.validate(entry.spec(instance.param.values())) == entry.name
