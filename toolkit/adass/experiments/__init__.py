"""Experiments built on runs: ``compare`` (samplers, exchanges and codecs side by side), ``bench``
(the benchmark suites behind ``adass bench``) and ``reproduce`` (the thesis' claims, with verdicts).
They call :func:`adass.runtime.run`; nothing below them imports them."""

__all__: list[str] = []
