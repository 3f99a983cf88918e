"""The environment contract is declared once: the optional members are the fields of
``EnvMembers``, the docs table is those fields, and ``Env`` reads a user's object through them."""

from __future__ import annotations

import dataclasses
import re
import typing
from pathlib import Path

import pytest

import pytest_rlgate as rg
from pytest_rlgate import envs
from pytest_rlgate.environment import contract
from pytest_rlgate.environment.members import EnvMembers, MemberMeta

PAGE = Path(__file__).resolve().parents[1] / "docs" / "environments.md"
_CELL = re.compile(r"(?<!\\)\|")


def _table() -> list[list[str]]:
    """The rows of the contract table in docs/environments.md, each as its cells."""
    text = PAGE.read_text(encoding="utf-8")
    section = text[text.index("## The contract"):]
    section = section[:section.index("\n## ", 1)]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return [[cell.strip() for cell in _CELL.split(line)[1:-1]] for line in rows]


def _declared_row(field: dataclasses.Field[object]) -> list[str]:
    meta = typing.cast(MemberMeta, field.metadata)
    return [meta["shown"].replace("|", "\\|"), "no", meta["absent"].replace("|", "\\|"),
            meta["used_by"].replace("|", "\\|")]


def test_the_docs_table_is_the_declaration() -> None:
    optional = [row for row in _table() if row[1] == "no"]
    expected = [_declared_row(f) for f in dataclasses.fields(EnvMembers)]
    shown = "\n".join("| " + " | ".join(row) + " |" for row in expected)
    assert optional == expected, f"docs/environments.md's contract table should list, after the required rows:\n{shown}"
    # each row names its member first, so the table reads as the list of names
    assert [row[0].strip("`").split("`")[0].split(":")[0].split("(")[0] for row in optional] == \
        [f.name for f in dataclasses.fields(EnvMembers)]


def test_the_required_rows_are_the_protocol() -> None:
    required = [row[0].strip("`").split("`")[0].split(":")[0].split("(")[0] for row in _table() if row[1] == "yes"]
    protocol = [name for name in rg.Environment.__annotations__] + ["score"]
    assert required == protocol == ["name", "categories", "score"]
    assert not set(required) & {f.name for f in dataclasses.fields(EnvMembers)}


class _Bare:
    name = "bare"
    categories = ("a",)

    def score(self, reply: str, case: object) -> float:
        return 1.0


def test_an_environment_without_optional_members_gets_every_default() -> None:
    env = rg.load_env(_Bare())
    assert env.members == EnvMembers()  # every field at its default
    assert (env.version, env.guards, env.system, env.hacks, env.rewards, env.max_turns) == ("0", (), None, (), {}, 1)
    assert env.passes(1.0) and not env.passes(0.99)
    assert env.messages_for("hi") == [{"role": "user", "content": "hi"}]
    assert env.case_for("hi") is None and not env.can_build_prompts and not env.is_episodic


def test_members_are_read_as_declared() -> None:
    class Full(_Bare):
        version = 3  # read as text
        guards = ["kept"]  # a list reads as a tuple
        SYSTEM = "Be brief."  # the older spelling of system
        passes = 0.5  # not callable: no such member, so the default rule
        base_model = ""  # empty: none
        case_for = None  # None: absent
        rewards = {"lenient": lambda reply, case: 1.0}

        def markers(self, reply: str, case: object) -> dict[str, float]:
            return {"kept": 1.0}

    env = rg.load_env(Full())
    assert env.version == "3" and env.guards == ("kept",) and env.system == "Be brief."
    assert env.members.passes is None and env.passes(1.0) and not env.passes(0.5)
    assert env.base_model is None and env.members.case_for is None
    assert env.messages_for("hi")[0] == {"role": "system", "content": "Be brief."}
    assert env.markers("x", {}) == {"kept": 1.0} and set(env.rewards) == {"lenient"}
    # each environment gets its own rewards mapping: the default one is never shared
    assert rg.load_env(_Bare()).rewards is not rg.load_env(_Bare()).rewards


@pytest.mark.parametrize(("member", "value", "says"), [
    ("max_turns", 0, "'max_turns' must be a positive integer"),
    ("tools", ["not a function"], "'tools' must be a list of typed functions"),
    ("environment_factory", 3, "'environment_factory' must be a class or a function"),
])
def test_a_member_its_reader_refuses_is_one_line_naming_it(member: str, value: object, says: str) -> None:
    bad = type("Bad", (_Bare,), {member: value})()
    with pytest.raises(rg.UsageError, match=re.escape(says)) as caught:
        rg.load_env(bad)
    assert str(caught.value).startswith("environment bare: ")


def test_the_built_in_environments_are_found_by_looking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pkgutil
    import sys


    assert set(contract.env_names()) >= {info.name for info in pkgutil.iter_modules(envs.__path__)}
    assert rg.load_env("reasoning_gym[leg_counting]").name == "reasoning_gym-leg_counting"  # its ENVIRONMENT
    pyproject = (Path(rg.__file__).parent.parent / "pyproject.toml").read_text(encoding="utf-8")
    assert '"rlgate.envs"]\nrefund' not in pyproject  # the entry-point group is for other packages only
    # a new module in the package is a new registered name, with no list to edit
    package = tmp_path / "myenvs"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "coin.py").write_text("name = 'coin'\ncategories = ('heads',)\n"
                                     "def score(reply, case):\n    return float(reply == 'heads')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(contract, "BUILTIN_PACKAGE", "myenvs")
    contract._builtin.cache_clear()
    try:
        assert contract.env_names()["coin"] == "myenvs.coin"
        assert contract._load("coin").name == "coin"
    finally:
        contract._builtin.cache_clear()
        sys.modules.pop("myenvs.coin", None)
        sys.modules.pop("myenvs", None)
