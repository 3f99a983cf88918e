"""The artifact cache: keys, a hit on the second request, atomic publish, one build across processes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_rlgate._io import cache
from pytest_rlgate.data.rows import grade_replies
from pytest_rlgate.errors import UsageError
from pytest_rlgate.train.cached import run_key
from pytest_rlgate.train.methods import make_knobs
from pytest_rlgate.train.pipeline import Prepared, _cached_base_run, load_prompts


def test_key_is_canonical_json_sha256() -> None:
    a = cache.key(base="tiny", knobs={"lr": 1e-3, "steps": 40}, seeds=(17, 18))
    b = cache.key(seeds=[17, 18], knobs={"steps": 40, "lr": 1e-3}, base="tiny")
    assert a == b and len(a) == 64
    assert a != cache.key(base="tiny", knobs={"lr": 1e-3, "steps": 41}, seeds=(17, 18))
    import hashlib

    assert cache.key(x=1) == hashlib.sha256(b'{"x":1}').hexdigest()


@pytest.mark.parametrize("bad", [object(), float("nan"), {1, 2}])
def test_key_rejects_values_that_are_not_json(bad: object) -> None:
    with pytest.raises(UsageError, match="cache key part"):
        cache.key(part=bad)


def test_root_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "env"))
    assert cache.cache_root() == tmp_path / "env"
    assert cache.cache_root(tmp_path / "arg") == tmp_path / "arg"
    monkeypatch.delenv(cache.CACHE_ENV)
    assert "pytest-rlgate" in str(cache.cache_root())


def test_second_request_is_a_hit(tmp_path: Path) -> None:
    calls: list[Path] = []

    def build(out: Path) -> None:
        calls.append(out)
        assert out.is_dir() and not any(out.iterdir())
        (out / "weights.bin").write_bytes(b"abc")

    first = cache.cached_dir("thing", "k1", build, root=tmp_path)
    second = cache.cached_dir("thing", "k1", build, root=tmp_path)
    assert first == second == tmp_path / "thing" / "k1"
    assert len(calls) == 1 and calls[0] != first  # built in a temporary sibling
    assert (first / "weights.bin").read_bytes() == b"abc"
    assert cache.is_complete(first)
    assert json.loads((first / cache.MARKER).read_text())["key"] == "k1"
    assert [p.name for p in (tmp_path / "thing").iterdir() if p.name.startswith(".tmp-")] == []


def test_rebuild_replaces_the_artifact(tmp_path: Path) -> None:
    versions = iter([b"one", b"two"])

    def build(out: Path) -> None:
        (out / "f").write_bytes(next(versions))

    cache.cached_dir("thing", "k", build, root=tmp_path)
    path = cache.cached_dir("thing", "k", build, root=tmp_path, rebuild=True)
    assert (path / "f").read_bytes() == b"two"


def test_a_failed_build_publishes_nothing_and_is_retried(tmp_path: Path) -> None:
    def broken(out: Path) -> None:
        (out / "half.bin").write_bytes(b"x")
        raise KeyboardInterrupt  # an interrupted build (Ctrl-C) as much as an error

    with pytest.raises(KeyboardInterrupt):
        cache.cached_dir("thing", "k", broken, root=tmp_path)
    assert list((tmp_path / "thing").iterdir()) == [tmp_path / "thing" / "k.lock"]
    path = cache.cached_dir("thing", "k", lambda out: (out / "ok").write_text("1"), root=tmp_path)
    assert (path / "ok").read_text() == "1" and not (path / "half.bin").exists()


def test_leftovers_of_a_killed_build_are_never_served(tmp_path: Path) -> None:
    kind = tmp_path / "thing"
    # a build killed before its rename: a temp folder with content and no marker
    stale = kind / ".tmp-k-999-deadbeef"
    stale.mkdir(parents=True)
    (stale / "weights.bin").write_bytes(b"partial")
    # and a folder under the final name without a marker (e.g. copied in by hand, half-way)
    (kind / "k").mkdir()
    (kind / "k" / "weights.bin").write_bytes(b"partial")
    built: list[int] = []
    path = cache.cached_dir("thing", "k", lambda out: built.append(1) or (out / "weights.bin").write_bytes(b"full"),
                            root=tmp_path)
    assert built == [1]
    assert (path / "weights.bin").read_bytes() == b"full"
    assert not stale.exists()


@pytest.mark.parametrize("kind,key", [("../up", "k"), ("thing", "a/b"), ("", "k"), ("thing", ".hidden")])
def test_names_that_could_escape_the_cache_are_rejected(tmp_path: Path, kind: str, key: str) -> None:
    with pytest.raises(UsageError, match="cache"):
        cache.cached_dir(kind, key, lambda out: None, root=tmp_path)


def test_two_processes_build_once(tmp_path: Path) -> None:
    log = tmp_path / "builds.log"
    script = textwrap.dedent(
        f"""
        import time
        from pathlib import Path
        from pytest_rlgate._io import cache

        def build(out):
            with open({str(log)!r}, "a") as f:
                f.write("built\\n")
            time.sleep(1.0)  # long enough that the other process arrives mid-build
            (out / "artifact").write_text("done")

        path = cache.cached_dir("thing", "shared", build, root={str(tmp_path / "cache")!r})
        print((path / "artifact").read_text())
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert outputs == ["done", "done"]
    assert log.read_text().splitlines() == ["built"]


def test_lock_timeout_names_the_lock_file(tmp_path: Path) -> None:
    from filelock import FileLock

    (tmp_path / "thing").mkdir()
    with FileLock(str(tmp_path / "thing" / "k.lock")), pytest.raises(UsageError, match=r"k\.lock"):
        cache.cached_dir("thing", "k", lambda out: None, root=tmp_path, lock_timeout=0.1)


# --------------------------------------------------------------------------- environments in keys


class StrictCalc:
    """The calc task under the same name with another score: another fingerprint."""

    name = "calc"
    categories = ("arithmetic", "word_problem", "unanswerable")

    def score(self, reply: str, case: dict) -> float:
        return float(reply.strip() == f"It is {case['answer']}.")


def test_run_keys_carry_the_environment_fingerprint(tmp_path: Path) -> None:
    from _calc_env import CalcEnv, SumsEnv, write_calc_prompts


    prompts = str(write_calc_prompts(tmp_path / "calc.jsonl"))

    def key(env: object, **knobs: object) -> str:
        return run_key(make_knobs("grpo", env=env, base_model="x/y", prompts_file=prompts, **knobs))

    assert key(CalcEnv()) == key(CalcEnv()) == key("_calc_env:CalcEnv", run_name="elsewhere")
    assert key(CalcEnv()) != key(SumsEnv())  # another environment
    assert key(CalcEnv()) != key(StrictCalc())  # the same name, another reward


def test_base_rows_graded_by_another_reward_are_never_served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from _calc_env import CalcEnv, calc_reply, write_calc_prompts


    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    prompts = str(write_calc_prompts(tmp_path / "calc.jsonl"))
    sampled: list[str] = []

    def base_rows(env: object) -> list[dict]:
        knobs = make_knobs("grpo", env=env, base_model="x/y", prompts_file=prompts)
        prep = Prepared(knobs=knobs, model=None, tokenizer=None, prompts=load_prompts(knobs))
        holdout = prep.prompts.holdout

        def sample() -> list[dict]:
            sampled.append(prep.env.name)
            return grade_replies(holdout, [[calc_reply(item, True)] for item in holdout], env=prep.env)

        return _cached_base_run(prep, 17, "base", 0, sample)

    first = base_rows(CalcEnv())
    assert base_rows(CalcEnv()) == first and sampled == ["calc"]  # the same reward: served
    strict = base_rows(StrictCalc())
    assert sampled == ["calc", "calc"] and strict != first  # another reward: sampled and graded again
