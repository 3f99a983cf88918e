"""One word per concept: the flags of every command and the plugin's settings say each idea one way.

The eight names that used to mean two things (the release file and the model were both a
"policy", a harness's score field and the gated pass^K both a "metric", ...) now have one
spelling each; the old spellings still parse for one release, hidden from ``--help``.
"""

from __future__ import annotations

import argparse

import pytest

from pytest_rlgate.cli import build_parser

#: old spelling -> the one that replaced it (still accepted, with a warning, for one release)
RENAMED = {"--policy": "--release-policy", "--metric": "--score-key", "--prompts": "--prompts-file",
           "--eval-k": "--k", "--max-completion-length": "--max-new-tokens", "--alpha": "--family-level",
           "--seed": "--bootstrap-seed / --prompt-seed"}


def _parsers(parser: argparse.ArgumentParser, prog: str = "rlgate") -> dict[str, argparse.ArgumentParser]:
    found = {prog: parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.update(_parsers(sub, f"{prog} {name}"))
    return found


def _shown(parser: argparse.ArgumentParser) -> set[str]:
    return {flag for action in parser._actions if action.help is not argparse.SUPPRESS
            for flag in action.option_strings}


def test_no_command_shows_an_old_spelling() -> None:
    parsers = _parsers(build_parser())
    shown = {prog: _shown(parser) & set(RENAMED) for prog, parser in parsers.items()}
    assert {prog: flags for prog, flags in shown.items() if flags} == {}
    every = set().union(*(_shown(parser) for parser in parsers.values()))
    assert {"--release-policy", "--score-key", "--prompts-file", "--k", "--max-new-tokens", "--family-level",
            "--bootstrap-seed", "--prompt-seed", "--sample-seed"} <= every


def test_a_flag_means_one_thing_wherever_it_appears() -> None:
    """Each flag shown by several commands has one destination (one idea); its help may say more or less."""
    dests: dict[str, set[str]] = {}
    for parser in _parsers(build_parser()).values():
        for action in parser._actions:
            if action.help is not argparse.SUPPRESS:
                for flag in action.option_strings:
                    dests.setdefault(flag, set()).add(action.dest.removeprefix("read_"))
    # one idea under two attribute names: the train knob that fills SampleOptions.seed, plan's gate confidence,
    # a base run (by its number in a run folder for `baseline save`, by its rows file for the gate)
    same = {"sample_seed": "seed", "confidence": "confidence_level", "base_run": "base_runs"}
    ideas = {flag: {same.get(name, name) for name in names} for flag, names in dests.items()}
    # --batch-size: prompts per generate call to the sampler, completions per step to GRPO (TRL's own name)
    twice = {flag: names for flag, names in ideas.items() if len(names) > 1 and flag != "--batch-size"}
    assert twice == {}


@pytest.mark.parametrize("old", ["--policy", "--metric"])
def test_the_old_plugin_settings_are_hidden_and_still_read(pytester: pytest.Pytester, old: str) -> None:
    shown = pytester.runpytest("--help").stdout.str()
    assert f"--rlgate-{old[2:]} " not in shown and f"--rlgate-{RENAMED[old][2:]}" in shown
