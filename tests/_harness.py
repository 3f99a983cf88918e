"""Real eval-harness logs for the reader tests, written by the harnesses themselves.

Inspect logs are generated live (its scripted ``mockllm/model``, a few seconds); the
lm-eval logs are committed under ``tests/data/harness/lm_eval`` (two runs of the real
harness on the shipped tiny policy take ~40 s; ``tests/data/harness/make_lm_eval.py``
regenerates them, and a slow test does so live).
"""

from __future__ import annotations

from pathlib import Path

HARNESS_DATA = Path(__file__).parent / "data" / "harness"
LM_EVAL = HARNESS_DATA / "lm_eval"

#: Inspect task: 3 categories x 8 samples x 2 epochs; the candidate forgets most math answers
CATEGORIES = ("refund", "math", "chat")
N_PER_CATEGORY = 8
EPOCHS = 2


def _answer_of(sample_index: int) -> str:
    return f"answer-{sample_index}"


def write_inspect_log(folder: Path, *, candidate: bool = False, error_on: frozenset[int] = frozenset(),
                      fail_on_error: bool | float = False, task_version: int = 1, name: str = "rg_inspect") -> Path:
    """Run a real Inspect eval with the scripted mock model; return the .eval log it wrote."""
    from inspect_ai import Task, eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate

    samples = [Sample(input=f"question {i}: say {_answer_of(i)}", target=_answer_of(i), id=f"q{i}",
                      metadata={"category": CATEGORIES[i % len(CATEGORIES)], "scenario": f"s{i // 2}"})
               for i in range(len(CATEGORIES) * N_PER_CATEGORY)]
    calls: dict[int, int] = {}

    def reply(messages, tools, tool_choice, config):
        index = int(messages[-1].text.split(":")[0].split()[-1])
        if index in error_on:
            raise RuntimeError(f"the mock provider refused question {index}")
        calls[index] = calls.get(index, 0) + 1
        wrong = (index % 2 == 1) if CATEGORIES[index % 3] == "chat" and calls[index] == 2 else False
        if candidate and CATEGORIES[index % 3] == "math" and index % 4 != 1:
            wrong = True
        out = ModelOutput.from_content("mockllm/model", "no idea" if wrong else _answer_of(index))
        out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)  # no tokenizer download
        return out

    task = Task(dataset=samples, solver=generate(), scorer=match(), epochs=EPOCHS, name=name, version=task_version)
    (log,) = inspect_eval(task, model=get_model("mockllm/model", custom_outputs=reply), log_dir=str(folder),
                          display="none", fail_on_error=fail_on_error, max_samples=1)
    return Path(log.location)


def paired_category_deltas(before: dict[tuple[str, str], list[float]],
                           after: dict[tuple[str, str], list[float]]) -> dict[str, float]:
    """An independent reference for the gate: per-unit mean pass of each side, paired, averaged per category.

    *before*/*after* map (category, unit) -> the 0/1 passes of that unit's replies.
    """
    out: dict[str, list[float]] = {}
    for key, passes in before.items():
        mine, theirs = sum(passes) / len(passes), sum(after[key]) / len(after[key])
        out.setdefault(key[0], []).append(theirs - mine)
    return {category: sum(d) / len(d) for category, d in out.items()}


def gate_deltas(result) -> dict[str, float]:
    """pass@1 delta per category (not overall) of a gate result."""
    return {c.group: c.delta for c in result.comparisons if c.metric == "pass@1" and c.group != "overall"}
