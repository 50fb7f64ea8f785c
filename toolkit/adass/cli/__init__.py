"""The ``adass`` command line: the parsers are generated from the option declarations
(:mod:`adass.config` for run options, :mod:`adass.cli.command_options` for the commands' own), and
:mod:`adass.cli.commands` does what each command asks once its input is checked."""

from .main import main

__all__ = ["main"]
