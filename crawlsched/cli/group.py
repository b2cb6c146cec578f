"""The command line's top group: a failed command is one line and its exit code; a flag's
help shows no type (typer would print `<bool>` after every flag, `--help` too)."""

from __future__ import annotations

from typing import Any

import typer
from typer import _click
from typer.core import TyperGroup

from crawlsched.cli.backend import CommandFailed


class CommandGroup(TyperGroup):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _hide_flag_types(self)

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        for param in params:  # typer adds its completion flags after the group is made
            if getattr(param, "is_flag", False):
                param.metavar = ""
        return params

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except CommandFailed as e:
            from crawlsched.cli.common import print_error

            print_error(e.message)
            raise typer.Exit(e.code) from None


def _hide_flag_types(command: Any) -> None:
    """An empty metavar on every flag (and help option) of `command` and its subcommands."""
    for param in command.params:
        if getattr(param, "is_flag", False):
            param.metavar = ""
    help_option = command.get_help_option(_click.Context(command))
    if help_option is not None:
        help_option.metavar = ""
    for sub in (getattr(command, "commands", None) or {}).values():
        _hide_flag_types(sub)
