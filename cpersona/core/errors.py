"""Errors the core raises for bad input. The MCP layer turns them into `ok: false`."""

from __future__ import annotations


class InvalidArgument(ValueError):
    """An argument breaks a rule. `argument` names it (dotted for nested keys)."""

    def __init__(self, argument: str, rule: str) -> None:
        super().__init__(f"{argument}: {rule}")
        self.argument = argument
        self.rule = rule
