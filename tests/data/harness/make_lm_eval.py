"""Regenerate the committed lm-evaluation-harness logs under tests/data/harness/lm_eval/.

Runs the real ``lm_eval`` (its ``hf`` model, CPU, offline) on the shipped tiny refund policy
over a small local task folder, twice: the base, and a candidate with a shorter generation
budget (``--gen_kwargs max_gen_toks=12``), which cuts the tool calls of with-id prompts
short. Both runs keep ``--log_samples``. About 40 s; run it after an lm-eval upgrade::

    python tests/data/harness/make_lm_eval.py [OUT_DIR]

The tests read these files (and one slow test regenerates them live, so an upstream format
change breaks our tests, not our users).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
TASKS = {
    "rg_refund.yaml": """\
task: rg_refund
dataset_path: json
dataset_kwargs:
  data_files:
    test: refund.jsonl
test_split: test
output_type: generate_until
doc_to_text: "{{prompt}}"
doc_to_target: "{{target}}"
process_results: !function rg_utils.contains
generation_kwargs:
  until: ["\\n\\n"]
  max_gen_toks: 40
  do_sample: false
filter_list:
  - name: none
    filter:
      - function: take_first
  - name: first-line
    filter:
      - function: regex
        regex_pattern: "^([^\\n]*)"
        group_select: 0
        fallback: ""
      - function: take_first
metric_list:
  - metric: contains
    aggregation: mean
    higher_is_better: true
metadata:
  version: 2.0
""",
    "rg_refund_choice.yaml": """\
task: rg_refund_choice
dataset_path: json
dataset_kwargs:
  data_files:
    test: refund.jsonl
test_split: test
output_type: multiple_choice
doc_to_text: "{{prompt}}"
doc_to_choice: "{{choices}}"
doc_to_target: "{{label}}"
metric_list:
  - metric: acc
  - metric: acc_norm
metadata:
  version: 1.0
""",
    "rg_utils.py": '''\
def contains(doc, results):
    """1.0 when the reply holds the expected text (the order id, or the ask for one)."""
    return {"contains": float(doc["target"] in results[0])}
''',
}
CHOICES = {
    "with_id": ["Let me look up that order for you.", "Sorry, I can only help with orders and refunds."],
    "no_id": ["Which order is it? Please send the order id.", "Here is a poem about the sea."],
    "off_topic": ["Sorry, I can only help with orders and refunds.", "Let me look up that order for you."],
}
TARGETS = {"no_id": "order", "off_topic": "only help"}


def _dataset(folder: Path) -> None:
    sys.path.insert(0, str(HERE.parents[2]))
    from pytest_rlgate.envs.refund.templates import build_prompts

    with open(folder / "refund.jsonl", "w", encoding="utf-8") as out:
        for item in build_prompts(seed=0, size="small"):
            category = item["category"]
            doc = {"prompt": item["prompt"], "category": category, "scenario_id": item["scenario_id"],
                   "target": item["case"]["order_id"] or TARGETS[category],
                   "choices": CHOICES[category], "label": 0}
            out.write(json.dumps(doc) + "\n")


def _run(work: Path, name: str, extra: list[str]) -> None:
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    command = [sys.executable, "-m", "lm_eval", "run", "--model", "hf",
               "--model_args", "pretrained=tiny-refund,dtype=float32", "--tasks", "rg_refund,rg_refund_choice",
               "--include_path", "tasks", "--device", "cpu", "--batch_size", "8", "--apply_chat_template",
               "--log_samples", "--seed", "0", "--output_path", f"out/{name}", *extra]
    subprocess.run(command, cwd=work, env=env, check=True, stdout=subprocess.DEVNULL)


def generate(out: Path) -> Path:
    """Run lm-eval for the base and the candidate; copy their output folders to *out*."""
    from pytest_rlgate.policy.load import tiny_policy_dir

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "tasks").mkdir()
        for name, text in TASKS.items():
            (work / "tasks" / name).write_text(text)
        _dataset(work)
        (work / "tiny-refund").symlink_to(tiny_policy_dir("rlgate/tiny-refund"))
        _run(work, "base", [])
        _run(work, "candidate", ["--gen_kwargs", "max_gen_toks=12"])
        for side in ("base", "candidate"):
            target = out / side
            shutil.rmtree(target, ignore_errors=True)
            (model,) = (work / "out" / side).iterdir()
            shutil.copytree(model, target)
    return out


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parents[2]))
    print(generate(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "lm_eval"))
