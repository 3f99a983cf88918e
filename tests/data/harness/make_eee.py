"""Regenerate the Every Eval Ever files under tests/data/harness/eee/ from the committed lm-eval logs.

``every-eval-ever`` (PyPI) needs Python >= 3.12 and the test venv is 3.11, so this runs its
own converter from a separate 3.12 environment::

    python3.12 -m venv /tmp/eee-venv && /tmp/eee-venv/bin/pip install every-eval-ever==0.3.0
    python tests/data/harness/make_eee.py /tmp/eee-venv/bin/python

For each side (``base``, ``candidate``) and each task of ``tests/data/harness/lm_eval`` it
runs ``python -m every_eval_ever convert lm_eval --include_samples`` on a copy holding the
run's results file and that task's samples file alone, with edits to the copy of the
results file only: ``model_args.pretrained`` and ``model_name`` become ``rlgate/tiny-refund``
(the converter requires an ``org/name`` model id) and its per-task tables keep that task
(the converter wants a samples file for every task listed). One task at a time because the
converter finds a task's samples by the glob ``samples_<task>_*.jsonl``, which for
``rg_refund`` also matches ``samples_rg_refund_choice_*.jsonl`` and takes that file.
The samples lines themselves are the ones lm-eval wrote, untouched.

``demo/`` is Every Eval Ever's own frozen reference conversion, copied from its repository
(``tests/data/skill_reference_conversion/data/demo-source/demo-org/demo-model/``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
LM_EVAL = HERE / "lm_eval"
OUT = HERE / "eee"


def main(python: str) -> None:
    for side in ("base", "candidate"):
        (results,) = (LM_EVAL / side).glob("results_*.json")
        target = OUT / side
        shutil.rmtree(target, ignore_errors=True)
        for samples in sorted((LM_EVAL / side).glob("samples_*.jsonl")):
            with tempfile.TemporaryDirectory() as tmp:
                run = Path(tmp) / side
                run.mkdir()
                data = json.loads(results.read_text(encoding="utf-8"))
                data["config"]["model_args"]["pretrained"] = data["model_name"] = "rlgate/tiny-refund"
                task = samples.name[len("samples_"):].rsplit("_", 1)[0]
                for key in ("results", "configs", "versions", "n-shot", "higher_is_better", "n-samples"):
                    data[key] = {name: value for name, value in data.get(key, {}).items() if name == task}
                (run / results.name).write_text(json.dumps(data, indent=2), encoding="utf-8")
                shutil.copy(samples, run / samples.name)
                converted = Path(tmp) / "out"
                subprocess.run([python, "-m", "every_eval_ever", "convert", "lm_eval", "--log_path", str(run),
                                "--output_dir", str(converted), "--include_samples",
                                "--source_organization_name", "pytest-rlgate", "--evaluator_relationship", "other"],
                               check=True)
                for file in converted.glob(f"{task}/*/*/*"):
                    if file.name.endswith(("_samples.jsonl", ".json")):
                        (target / task).mkdir(parents=True, exist_ok=True)
                        shutil.copy(file, target / task / file.name)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "python3.12")
