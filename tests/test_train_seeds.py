"""A recipe at several trainer seeds, really trained (a random tiny Llama, one step each):
``rlgate train --seeds``, its run and recipe folders and report, and ``@pytest.mark.rlgate(seeds=...)``.

Every test shares one cache, and the CLI and the fixtures name the same knobs, so the two
runs train once for the whole module.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

# pytester's in-process runs drop modules first imported inside them; datasets cannot be
# imported twice (pyarrow extension types), so the training stack is imported out here.
import datasets  # noqa: F401
import peft  # noqa: F401
from _tiny_model import build_tiny
from trl import GRPOConfig, GRPOTrainer  # noqa: F401

from pytest_rlgate import UsageError
from pytest_rlgate.cli import main
from pytest_rlgate.report import report_text, write_index, write_report
from pytest_rlgate.train import RunFolder
from pytest_rlgate.train.seeds import check_seeds

torch.set_num_threads(1)

KNOBS = {"size": "small", "steps": 1, "max_new_tokens": 16, "monitor_every": 0, "base_runs": 2}


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """(tiny base model folder, cache folder) shared by every test here."""
    base = tmp_path_factory.mktemp("tiny-seeds")
    build_tiny(base, seed=0)
    return str(base), tmp_path_factory.mktemp("cache-seeds")


@pytest.fixture
def cli(shared, monkeypatch, tmp_path):
    base, cache = shared
    monkeypatch.setenv("RLGATE_CACHE_DIR", str(cache))
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in KNOBS.items()]

    def run(*extra: str) -> int:
        return main(["train", "grpo", "--seeds", "17", "18", "--base-model", base, *flags,
                     "--runs-dir", str(tmp_path / "runs"), "--run-name", "r", "--no-progress", *extra])

    return run


def test_train_seeds_writes_a_run_per_seed_and_the_recipe_beside_them(cli, tmp_path, capsys):
    code = cli()
    out = capsys.readouterr().out
    runs = tmp_path / "runs"
    recipe = json.loads((runs / "r-recipe" / "recipe.json").read_text(encoding="utf-8"))
    assert code == (0 if recipe["gate"]["passed"] else 1)
    assert recipe["seeds"] == [17, 18] and recipe["runs"] == {"17": "../r-seed17", "18": "../r-seed18"}
    assert recipe["gate"]["kind"] == "recipe" and recipe["knobs"]["steps"] == 1
    assert "sample_seed" not in recipe["knobs"]
    for seed in (17, 18):
        run = RunFolder.open(runs / f"r-seed{seed}")
        assert run.config["knobs"]["sample_seed"] == seed and run.config["knobs"]["run_name"] == f"r-seed{seed}"
        after = [json.loads(line) for line in run.after_file.read_text(encoding="utf-8").splitlines()[1:]]
        assert {row["sample_seed"] for row in after} == {seed}
    assert "seed 17: trained in" in out and "seed 18: trained in" in out
    assert "recipe gate " in out and "over 2 training seeds (17, 18)" in out and "per-seed Δ" in out
    text = (runs / "r-recipe" / "recipe.txt").read_text(encoding="utf-8")
    assert text.startswith("recipe gate ") and "each seed on its own:" in text


def test_existing_folders_need_overwrite_and_then_come_from_the_cache(cli, tmp_path, capsys):
    cli()
    capsys.readouterr()
    assert cli() == 2
    assert "--run-name 'r':" in capsys.readouterr().err
    cli("--overwrite")
    out = capsys.readouterr().out
    assert "seed 17: served from the cache" in out and "seed 18: served from the cache" in out


def test_report_to_is_refused_with_seeds(cli, capsys):
    assert cli("--report-to", "tensorboard") == 2
    assert "--report-to tensorboard: --seeds trains through the run cache" in capsys.readouterr().err


@pytest.mark.parametrize(("seeds", "message"), [
    ((), "give a list of integer trainer seeds"), ([17, 17], "each seed once"), (17, "give a list"),
])
def test_bad_seeds_are_one_line_usage_errors(seeds, message):
    with pytest.raises(UsageError, match=message):
        check_seeds(seeds)


def test_the_recipe_folder_has_its_own_report_and_index_row(cli, tmp_path):
    cli()
    folder = tmp_path / "runs" / "r-recipe"
    page = write_report(folder).read_text(encoding="utf-8")
    assert (folder / "report-recipe.png").is_file()
    assert "per-seed Δ" in page and "<code>" in page  # the dots as text, beside the plot
    assert 'href="../r-seed17/report.html"' in page
    assert report_text(folder).startswith("recipe r-recipe: gate ")
    index = write_index(tmp_path / "runs").read_text(encoding="utf-8")
    assert "r-recipe" in index and "r-seed17" in index and "(recipe)" in index


SUITE = '''
import os, pytest

KNOBS = {knobs!r}

@pytest.mark.rlgate(method="grpo", base_model=os.environ["TINY_BASE"], seeds=(17, 18), **KNOBS)
def test_recipe(rlgate, rlgate_adapter, rlgate_before_rows, rlgate_after_rows):
    assert sorted(rlgate_adapter) == [17, 18] and rlgate_adapter[17].adapter != rlgate_adapter[18].adapter
    assert {{r["sample_seed"] for r in rlgate_before_rows}} == {{17, 18}}  # the first seed's base runs
    sampled = {{seed: {{r["sample_seed"] for r in rows}} for seed, rows in rlgate_after_rows.items()}}
    assert sampled == {{17: {{17}}, 18: {{18}}}}
    result = rlgate.compare(rlgate_before_rows, rlgate_after_rows)
    assert result.seeds == (17, 18) and result.to_dict()["kind"] == "recipe"

@pytest.mark.rlgate(method="grpo", seeds=17)
def test_bad_seeds(rlgate_adapter):
    pass

@pytest.mark.rlgate(method="grpo", seeds=(17, 18), sample_seed=3)
def test_both(rlgate_adapter):
    pass
'''


def test_the_marker_trains_one_adapter_per_seed_and_the_fixtures_are_mappings(shared, pytester, monkeypatch):
    base, cache = shared
    monkeypatch.setenv("RLGATE_CACHE_DIR", str(cache))
    monkeypatch.setenv("TINY_BASE", base)
    pytester.makepyfile(test_seeded=SUITE.format(knobs=KNOBS))
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines([
        "*rlgate: @pytest.mark.rlgate(seeds=...) 17: give a list of integer trainer seeds*",
        "*rlgate: @pytest.mark.rlgate(seeds=...) sets each run's sample_seed; drop sample_seed=3*",
    ])
    assert "per-seed Δ" in result.stdout.str()
