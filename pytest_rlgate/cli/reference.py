"""``docs/reference.md``: every option of every face, generated from the code that declares it.

    python -m pytest_rlgate.cli.reference > docs/reference.md

The page is read off the objects themselves, never written by hand: the real argument parser
of every ``rlgate`` command (:func:`pytest_rlgate.cli.build_parser`, each flag with its help,
value, range and default), the pytest plugin's settings as pytest registers them (every
``--rlgate-*`` option and ``rlgate_*`` ini key, with its ini type), and the classes whose fields
are options declared once (:data:`DECLARED`: each field's default, range, flag, plugin setting
and help). So a flag, a bound or a help text changed in its declaration changes the page when
it is regenerated, and ``tests/test_reference.py`` fails until it is. Older spellings kept for
one release (hidden from ``--help``) are left out, as ``--help`` leaves them out.

A new command, plugin setting, reader or knob needs nothing here. A new class of options
declared once (fields made by :func:`~pytest_rlgate.options.knob` or its like) is one line of
:data:`DECLARED`; the test names any class that is missing.

This module reads the pytest plugin, the other face on the top floor, through pytest's own
registration while it runs; nothing imports this module.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

from ..data import readers
from ..options import Deprecated
from . import build_parser

__all__ = ["COMMAND", "DECLARED", "PAGE", "main", "render"]

#: where the page lives in a checkout, and the command that regenerates it
PAGE = Path("docs") / "reference.md"
COMMAND = "python -m pytest_rlgate.cli.reference > docs/reference.md"

#: The classes whose fields are options declared once: (module, class, what its fields are).
#: A subclass lists only the fields its base does not have.
DECLARED: tuple[tuple[str, str, str], ...] = (
    ("pytest_rlgate.gate.options", "GateOptions",
     "the gate's options: `compare(..., name=value)`, `rlgate gate`'s flags and the plugin's settings"),
    ("pytest_rlgate.policy.generate", "SampleOptions",
     "how replies are drawn: `sample(..., name=value)` and the sampling flags of `rlgate sample`, `watch`, `eval`"),
    ("pytest_rlgate.train.config", "RunKnobs",
     "the knobs every training method shares: `rlgate train`'s flags and the keywords of "
     "`@pytest.mark.rlgate(method=..., **knobs)`"),
    ("pytest_rlgate.train.config", "GRPOKnobs", "GRPO's own knobs, beside `RunKnobs`'"),
    ("pytest_rlgate.train.dpo_config", "DPOKnobs", "DPO's own knobs, beside `RunKnobs`'"),
    ("pytest_rlgate.options", "ReadOptions",
     "how an eval harness's record becomes a row: `read_rows(path, name=value)`, `PATH#name=value`, the read "
     "flags of `rlgate gate` and `rlgate convert`, and the plugin's settings"),
    ("pytest_rlgate.environment.members", "EnvMembers",
     "the optional members of an environment, and what one without them gets"),
)

#: pytest-rlgate's own plugin group, and the prefix of its settings
_GROUP = "rlgate"
_INI_PREFIX = "rlgate_"
#: a default stated in a help text: ``(default: 0.2)``, ``(default 0.05)``
_STATED_DEFAULT = re.compile(r"\(default:? ([^()]*(?:\([^()]*\)[^()]*)*)\)")


#: an inline code span (its text is shown as it is)
_CODE_SPAN = re.compile(r"(`+).+?\1")


def prose(text: object) -> str:
    """*text* on one line, read by Markdown as written: outside its code spans, ``<name>`` is not an HTML
    tag and ``*.yaml`` does not start an emphasis."""
    text = " ".join(str(text).split())
    out, at = [], 0
    for span in _CODE_SPAN.finditer(text):
        out += [_escaped(text[at:span.start()]), span.group(0)]
        at = span.end()
    return "".join([*out, _escaped(text[at:])])


def _escaped(text: str) -> str:
    return re.sub(r"<(?=[A-Za-z/!?])", "&lt;", text).replace("*", "\\*")


def cell(text: object) -> str:
    """*text* as one Markdown table cell: one line, as written, pipes escaped."""
    return prose(text).replace("|", "\\|")


def code(text: object) -> str:
    """*text* as inline code (a value with a backtick in it keeps its own fence)."""
    text = str(text)
    fence = "``" if "`" in text else "`"
    return f"{fence}{text}{fence}"


def _table(head: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in rows]
    return lines


def shown(value: object) -> str:
    """A default as the page shows it: ``0.05``, ``refund``, ``17, 18, 19``, or ``—`` for none."""
    if value is None or value == () or value == [] or value == {}:
        return "—"
    if isinstance(value, bool):
        return code("true" if value else "false")
    if isinstance(value, float):
        return code(f"{value:g}")
    if isinstance(value, (tuple, list, frozenset, set)):
        return code(", ".join(str(v) for v in value))
    if isinstance(value, os.PathLike):
        return code(os.fspath(value))
    return code(value)


def kind(parse: object) -> str:
    """What a value must be, from its parser: a range (``an integer in [1, 1024], e.g. 4``) or a set of choices."""
    describe = getattr(parse, "describe", None)
    return describe() if callable(describe) else ""


# --- the rlgate command -----------------------------------------------------------------------------------


def _visible(action: argparse.Action) -> bool:
    """An option the command's ``--help`` shows: not ``--help`` itself, not an older spelling."""
    return (action.help != argparse.SUPPRESS and not isinstance(action, (argparse._HelpAction, Deprecated))
            and not isinstance(action, argparse._SubParsersAction))


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The help text as ``--help`` prints it (``%(default)s`` filled in)."""
    if not action.help:
        return ""
    return parser._get_formatter()._expand_help(action)


def _value(action: argparse.Action) -> str:
    """What the option takes: a switch, its choices, or its metavar with its range."""
    if action.nargs == 0:
        return "switch"
    if action.choices is not None and not isinstance(action.choices, dict):
        return "one of " + ", ".join(code(c) for c in action.choices)
    metavar = action.metavar if action.metavar is not None else action.dest.upper()
    words = " ".join(metavar) if isinstance(metavar, tuple) else str(metavar)
    if action.nargs in ("+", "*"):
        words += " ..."
    elif isinstance(action.nargs, int) and not isinstance(metavar, tuple):
        words = " ".join([words] * action.nargs)
    described = kind(action.type)
    repeat = " (repeatable)" if isinstance(action, argparse._AppendAction) else ""
    return f"{code(words)}{repeat}" + (f": {described}" if described else "")


def _positional(action: argparse.Action) -> str:
    """A positional argument as its usage writes it: ``AFTER.jsonl ...`` for one that takes several."""
    name = str(action.metavar or action.dest)
    return code(f"{name} ..." if action.nargs in ("+", "*") else name)


def _default(action: argparse.Action) -> str:
    if action.required:
        return "required"
    if action.nargs == 0:
        return "off" if action.default in (None, False) else "on"
    if action.default is argparse.SUPPRESS:
        return "—"
    return shown(action.default)


def _commands(parser: argparse.ArgumentParser, prefix: str) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """(``rlgate gate``, its one-line help, its parser) for every command and subcommand, in declaration order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) in seen:  # an alias of a subcommand listed already
                    continue
                seen.add(id(sub))
                yield f"{prefix} {name}", helps.get(name, ""), sub
                yield from _commands(sub, f"{prefix} {name}")


def _usage(parser: argparse.ArgumentParser) -> str:
    """The usage line, as wide as needed (the terminal's width must not change the page)."""
    formatter = argparse.HelpFormatter(parser.prog, width=10_000)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")
    return " ".join(formatter.format_help().split())


def _command_section(title: str, summary: str, parser: argparse.ArgumentParser) -> list[str]:
    lines = [f"### `{title}`", ""]
    if summary:
        lines += [prose(summary[0].upper() + summary[1:] + "."), ""]
    lines += ["```text", _usage(parser), "```", ""]
    for group in parser._action_groups:
        actions = [a for a in group._group_actions if _visible(a)]
        positional = [a for a in actions if not a.option_strings]
        options = [a for a in actions if a.option_strings]
        if positional:
            lines += _table(["argument", "help"], ([_positional(a), _help(parser, a)] for a in positional))
            lines.append("")
        if options:
            if group.title not in ("options", "optional arguments", "positional arguments"):
                lines += [f"*{group.title}*", ""]
            lines += _table(["option", "value", "default", "help"],
                            ([", ".join(code(flag) for flag in a.option_strings), _value(a), _default(a),
                              _help(parser, a)] for a in options))
            lines.append("")
    return lines


def command_reference() -> list[str]:
    """The section of every ``rlgate`` command, from the real parser."""
    parser = build_parser()
    lines = ["## The `rlgate` command", "",
             "Each command's flags, as its `--help` shows them: the value it takes (with its range, where the "
             "flag declares one), its default and its help.", ""]
    commands = list(_commands(parser, "rlgate"))
    lines += [" · ".join(f"[`{title}`](#{_anchor(title)})" for title, _, _ in commands), ""]
    for title, summary, sub in commands:
        lines += _command_section(title, summary, sub)
    return lines


def _anchor(title: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as dashes."""
    return re.sub(r"[^a-z0-9 _-]", "", title.lower()).replace(" ", "-")


# --- the pytest plugin -------------------------------------------------------------------------------------


def _plugin_parser() -> Any:
    """pytest's parser after the rlgate plugin registered its options, as for ``pytest --help``: a bare
    config (no other plugin from entry points) that registers the plugin, whose feature modules add theirs."""
    from _pytest.config import get_config

    config = get_config()
    config.pluginmanager.register(importlib.import_module("pytest_rlgate.plugin"), "rlgate")
    return config._parser


def _stated_default(help_: str) -> str:
    found = _STATED_DEFAULT.search(help_)
    return found.group(1) if found else ""


def plugin_reference() -> list[str]:
    """The plugin's command-line options with their ini twins, then the ini keys with no option."""
    parser = _plugin_parser()
    group = parser.getgroup(_GROUP)
    ini: dict[str, tuple[str, object, object]] = {name: value for name, value in parser._inidict.items()
                                                  if name.startswith(_INI_PREFIX)}
    rows, twinned = [], set()
    for option in group.options:
        action = option._action
        if not _visible(action) or str(action.help).startswith("deprecated"):
            continue
        twin = ini.get(action.dest)
        twinned.add(action.dest)
        help_ = action.help or ""
        default = _stated_default(help_) or ("off" if action.nargs == 0 else "unset")
        rows.append([", ".join(code(flag) for flag in action.option_strings),
                     f"{code(action.dest)} ({twin[1]})" if twin else "—", _value(action), default, help_])
    lines = ["## The pytest plugin", "",
             "Every `--rlgate-*` option has an ini twin (`[tool.pytest.ini_options]`, `pytest.ini`, ...): the "
             "command line wins over the ini file, and a test's own keywords win over both. Unset, a setting "
             "takes the default its help states.", ""]
    lines += _table(["option", "ini key (type)", "value", "default", "help"], rows)
    alone = [(name, spec) for name, spec in ini.items() if name not in twinned and not str(spec[0]).startswith(
        "deprecated")]
    if alone:
        lines += ["", "Ini keys with no command-line option:", ""]
        lines += _table(["ini key", "type", "default", "help"],
                        ([code(name), spec[1], shown(spec[2]), spec[0]] for name, spec in alone))
    return lines


# --- the classes declared once ------------------------------------------------------------------------------


def _field_default(spec: dataclasses.Field[Any]) -> object:
    if spec.default is not dataclasses.MISSING:
        return spec.default
    if spec.default_factory is not dataclasses.MISSING:
        return spec.default_factory()
    return None


def _field_help(spec: dataclasses.Field[Any], default: object) -> str:
    help_ = spec.metadata.get("help")
    if callable(help_):
        help_ = help_()
    text = str(help_ or "")
    if "%(" in text:
        text = text % {"default": default}
    return text


def _declared_fields(cls: type, base: type | None) -> list[dataclasses.Field[Any]]:
    """The fields of *cls* that are options (they carry a help or a contract row), less those of *base*."""
    inherited = {f.name for f in dataclasses.fields(base)} if base is not None else set()
    return [f for f in dataclasses.fields(cls) if f.name not in inherited
            and (f.metadata.get("help") or f.metadata.get("shown"))]


def _class_rows(cls: type, fields: Iterable[dataclasses.Field[Any]]) -> tuple[list[str], list[list[str]]]:
    """The table of a declared-once class: the columns its fields' metadata has, one row a field."""
    fields = list(fields)
    if all("shown" in f.metadata for f in fields):  # the environment contract: its own columns
        return (["member", "as declared", "default when absent", "used by"],  # the contract table's own text
                [[code(f.name), f.metadata["shown"], f.metadata["absent"], f.metadata["used_by"]]
                 for f in fields])
    has = {key for f in fields for key, value in f.metadata.items() if value}
    head = ["field", "default", "range"]
    head += ["flag"] if "flag" in has else []
    head += ["plugin setting"] if "setting" in has else []
    head += ["help"]
    rows = []
    for spec in fields:
        meta, default = spec.metadata, _field_default(spec)
        flag = meta.get("flag") or (f"--{spec.name.replace('_', '-')}" if "group" in meta else None)
        row = [code(spec.name), shown(default), kind(meta.get("bound") or meta.get("parse"))]
        if "flag" in has:
            row.append(code(flag) if flag else "—")
        if "setting" in has:
            row.append(code(f"--rlgate-{meta['setting']}") if meta.get("setting") else "—")
        rows.append([*row, _field_help(spec, default)])
    return head, rows


def _reader_options() -> list[str]:
    """The options each built-in reader declares for itself, beside ``ReadOptions``."""
    built_in = cast("dict[str, str]", readers.BUILTIN)  # not the entry points': the page is the package's
    rows = [[code(name), code(option.name), code(option.flag) if option.flag else "—", option.help]
            for name in built_in for option in readers.load_reader(name).options]
    lines = ["Each reader's own options (`read_rows(path, name=value)`, `PATH#name=value`, the flag where it has "
             "one, and `--rlgate-read name=value` in pytest):", ""]
    return lines + _table(["format", "option", "flag", "help"], rows)


def declared_reference() -> list[str]:
    """A table per class of :data:`DECLARED`, in order."""
    lines = ["## Declared once", "",
             "The classes whose fields are the options above: each field holds its default, its range, its flag "
             "and its help once, and the commands, the plugin and the Python API are generated from or checked "
             "against it.", ""]
    classes: dict[str, type] = {}
    for module, name, what in DECLARED:
        cls = getattr(importlib.import_module(module), name)
        classes[name] = cls
        base = next((classes[b.__name__] for b in cls.__mro__[1:] if b.__name__ in classes), None)
        lines += [f"### `{name}`", "", f"`{module}.{name}`: {what}.", ""]
        head, rows = _class_rows(cls, _declared_fields(cls, base))
        lines += _table(head, rows)
        lines.append("")
        if name == "ReadOptions":
            lines += [*_reader_options(), ""]
    return lines


# --- the page ---------------------------------------------------------------------------------------------


def render() -> str:
    """The whole page."""
    lines = ["# Reference", "",
             f"<!-- generated by `{COMMAND}`; tests/test_reference.py fails when it is stale. "
             "Change the declarations in the code, then regenerate. -->", "",
             "Every option of every face, read off the code that declares it: the `rlgate` commands' parsers, "
             "the pytest plugin's settings, and the classes that declare the options once. Older spellings "
             "still accepted for one release are not listed (`--help` hides them too). The guides explain when "
             "to use what: [the gate](gate.md), [training](training.md), [eval-harness output](harnesses.md).",
             "",
             "- [The `rlgate` command](#the-rlgate-command)",
             "- [The pytest plugin](#the-pytest-plugin)",
             "- [Declared once](#declared-once): "
             + ", ".join(f"[`{name}`](#{name.lower()})" for _, name, _ in DECLARED), ""]
    lines += command_reference()
    lines += plugin_reference()
    lines.append("")
    lines += declared_reference()
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Print the page (``python -m pytest_rlgate.cli.reference > docs/reference.md``)."""
    argparse.ArgumentParser(prog="python -m pytest_rlgate.cli.reference", description=__doc__.splitlines()[0]
                            ).parse_args(argv)
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

