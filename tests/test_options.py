"""One parser, one bounds check and one description for run options and plug-in parameters alike."""

import math

import param
import pytest

from adass.codecs import CODECS
from adass.config import OptimSection, options
from adass.options import Param, SpecError, allowed, check_value
from adass.sampling import SAMPLERS

BOOL_WORDS = [
    (True, True), (False, False), ("1", True), ("0", False), ("true", True), ("FALSE", False),
    ("Yes", True), ("no", False), ("on", True), (" OFF ", False),
]  # fmt: skip


@pytest.mark.parametrize("raw, expected", BOOL_WORDS)
def test_one_bool_parser_for_options_and_plug_in_parameters(raw, expected):
    assert check_value(param.Boolean(False), raw, "--flag") is expected
    assert Param(False).convert("thing", "flag", raw) is expected
    # the same words in a real plug-in spec
    assert CODECS.resolve(f"qsgd:shared={str(raw).strip()}")[1]["shared"] is expected


@pytest.mark.parametrize("raw", ["maybe", "2", "", "y"])
def test_other_words_are_not_booleans_anywhere(raw):
    with pytest.raises(SpecError, match="expected true\\|false"):
        check_value(param.Boolean(False), raw, "--flag")
    with pytest.raises(SpecError, match="expected true\\|false"):
        Param(False).convert("thing", "flag", raw)


@pytest.mark.parametrize("raw", ["nan", "NaN", "inf", "-inf", "Infinity", math.nan, math.inf, -math.inf])
def test_nan_and_infinity_fail_every_bounds_check(raw):
    for p in (param.Number(0.5, bounds=(0.0, 1.0)), param.Number(0.0), param.Integer(1, bounds=(0, 9))):
        with pytest.raises(SpecError) as err:
            check_value(p, raw, "--x")
        message = str(err.value)
        assert "\n" not in message and message.startswith("--x: ") and allowed(p) in message
    with pytest.raises(SpecError, match="ratio="):
        Param(0.5, low=0.0, high=1.0).convert("thing", "ratio", raw)


def test_infinity_is_allowed_only_where_a_bound_says_so():
    open_above = param.Number(1.0, bounds=(0.0, None))
    closed_at_inf = param.Number(1.0, bounds=(0.0, math.inf))
    assert allowed(open_above) == "a number in [0, inf)"
    assert allowed(closed_at_inf) == "a number in [0, inf]"
    assert allowed(param.Number(0.0)) == "a finite number"
    assert check_value(open_above, "1e300", "--x") == 1e300
    with pytest.raises(SpecError, match="--x: inf is not allowed"):
        check_value(open_above, "inf", "--x")
    assert check_value(closed_at_inf, "inf", "--x") == math.inf
    with pytest.raises(SpecError):
        check_value(closed_at_inf, "nan", "--x")


def test_a_plug_in_parameter_is_a_param_parameter_with_the_same_checks():
    eps = SAMPLERS.entry("adass").params["eps"]
    p = eps.parameter()
    assert isinstance(p, param.Number) and p.bounds == (0.0, 1.0) and p.default == 0.9
    assert eps.allowed() == allowed(p) == "a number in [0, 1]"
    for raw in ("0.25", 0.25):
        assert eps.convert("s", "eps", raw) == check_value(p, raw, "s", "eps") == 0.25
    depth = Param(8, "depth", choices=(8, 20))
    assert isinstance(depth.parameter(), param.Selector) and depth.convert("model", "depth", "20") == 20


def test_a_count_or_auto_takes_the_word_or_an_integer_within_its_bounds():
    final = Param("auto", "last epochs", low=0, high=10, kind=int)
    assert final.allowed() == "auto or an integer in [0, 10]"
    read = [final.convert("s", "final", raw) for raw in ("auto", " AUTO ", "3", 0, 10)]
    assert read == ["auto", "auto", 3, 0, 10]
    for raw in ("11", "-1", "2.5", "x", ""):
        with pytest.raises(SpecError, match="expected auto or an integer in \\[0, 10\\]$"):
            final.convert("s", "final", raw)


def test_run_options_and_plug_in_parameters_describe_bounds_alike():
    lr = options(OptimSection)["lr"]
    same = Param(0.05, low=1e-8, high=100.0)
    assert allowed(lr) == same.allowed() == "a number in [1e-08, 100]"


def test_messages_quote_unreadable_values_and_show_readable_ones():
    bits = Param(8, low=1, high=16)
    with pytest.raises(SpecError, match="bits='x' is not allowed; expected an integer in \\[1, 16\\]"):
        bits.convert("codec 'qsgd'", "bits", "x")
    with pytest.raises(
        SpecError, match="^--epochs: 0 is not allowed; expected an integer in \\[1, 100000\\]$"
    ):
        check_value(options(OptimSection)["epochs"], 0, "--epochs")


def test_the_examples_in_the_docstrings_hold():
    import doctest

    import adass.options

    assert doctest.testmod(adass.options).failed == 0


INTEGER_TEXT_REFUSED = ["1e1", "3.0", "1.5", "1_0", "１０", "٣", "0x10", "", " ", "+", "10 0"]


@pytest.mark.parametrize("raw", INTEGER_TEXT_REFUSED)
def test_an_integer_is_ascii_digits_with_a_sign_only(raw):
    with pytest.raises(SpecError, match="is not allowed; expected an integer in \\[1, 16\\]"):
        check_value(param.Integer(8, bounds=(1, 16)), raw, "--x")
    with pytest.raises(SpecError, match="bits="):
        Param(8, low=1, high=16).convert("codec 'qsgd'", "bits", raw)
    with pytest.raises(SpecError, match="bits="):
        CODECS.resolve(f"qsgd:bits={raw}")


@pytest.mark.parametrize("raw, expected", [("10", 10), ("+4", 4), (" 7 ", 7), (12, 12), (3.0, 3)])
def test_integers_in_digits_or_integral_python_values_are_read(raw, expected):
    assert check_value(param.Integer(8, bounds=(1, 16)), raw, "--x") == expected


@pytest.mark.parametrize("raw", ["０.5", "1_0.5", "0x1p-3", "1e", "e3", ".", "0.5.", "½"])
def test_a_number_is_ascii_too(raw):
    with pytest.raises(SpecError, match="is not allowed; expected a number in \\[0, 16\\]"):
        check_value(param.Number(1.0, bounds=(0.0, 16.0)), raw, "--x")
    with pytest.raises(SpecError, match="eps="):
        SAMPLERS.resolve(f"adass:eps={raw}")


NUMBER_TEXT_READ = [("1e-3", 1e-3), ("5.", 5.0), (".5", 0.5), ("-0", 0.0), ("2E1", 20.0)]


@pytest.mark.parametrize("raw, expected", NUMBER_TEXT_READ)
def test_numbers_in_ascii_decimal_or_exponent_form_are_read(raw, expected):
    assert check_value(param.Number(1.0, bounds=(-1.0, 100.0)), raw, "--x") == expected


def test_a_choice_of_integers_takes_digits_only():
    depth = Param(8, "depth", choices=(8, 20))
    assert depth.convert("model", "depth", "20") == 20
    with pytest.raises(SpecError, match="depth='2e1'"):
        depth.convert("model", "depth", "2e1")
