"""Every command's ``--help`` offers only what that command accepts.

Help text is generated from shared declarations (a gate option's field, a knob), so a phrase
true at one door can be false at another: ``rlgate sample --help`` once offered
``--family-level none`` and pointed to ``--confidence``, which ``sample`` refuses and lacks.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

import pytest

from pytest_rlgate.cli import build_parser, main

#: a flag named in help text (not a word that merely contains two dashes)
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _parsers(name: str, parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child, sub in action.choices.items():
                yield from _parsers(f"{name} {child}".strip(), sub)


@pytest.fixture
def commands(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, argparse.ArgumentParser]]:
    monkeypatch.setenv("COLUMNS", "10000")  # argparse wraps help at hyphens: --family-|level
    return [(name, parser) for name, parser in _parsers("", build_parser(None)) if name]


def test_every_flag_a_commands_help_names_is_one_it_accepts(commands) -> None:
    assert {name for name, _ in commands} >= {"gate", "sample", "plan", "watch", "select", "train grpo"}
    wrong = []
    for name, parser in commands:
        accepted = {flag for action in parser._actions for flag in action.option_strings}
        for flag in sorted(set(_FLAG.findall(parser.format_help())) - accepted):
            wrong.append(f"rlgate {name} --help names {flag}, which it does not accept")
    assert not wrong, "\n".join(wrong)


def test_none_is_offered_only_where_the_flag_takes_it(commands) -> None:
    wrong = []
    for name, parser in commands:
        for action in parser._actions:
            if "'none'" not in (action.help or "") or not action.option_strings:
                continue
            try:
                (action.type or str)("none")
            except (argparse.ArgumentTypeError, ValueError, TypeError):
                wrong.append(f"rlgate {name} {action.option_strings[0]} offers 'none' and refuses it")
    assert not wrong, "\n".join(wrong)


def test_sample_until_decided_refuses_family_level_none_at_the_door(capsys) -> None:
    with pytest.raises(SystemExit) as refused:  # argparse's own refusal, before anything is loaded
        main(["sample", "--until-decided", "before.jsonl", "--family-level", "none", "--out", "x.jsonl"])
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert "--family-level" in err and "'none'" in err
    assert "--confidence" not in err
