"""Published scorers, called exactly as their packages ship them, as ``reward(reply, case)``.

Nothing here re-implements a scorer. Inspect AI's scorers are built by their factories
(``match()``, ``includes()``, ...) and awaited on a ``TaskState`` whose output is the reply,
against a ``Target`` of the case's answer; a ``Score`` becomes a number with Inspect's own
``value_to_float`` (``C`` -> 1.0), as its ``accuracy``/``mean`` metrics read it. ``choice()``
first gets the choices the ``multiple_choice`` solver would mark after generating
(``parse_answers`` and ``set_choices_based_on_generated_response``, the solver's own code).
lm-evaluation-harness's pairs are built from the task YAML the installed package ships
(``tasks/gsm8k/gsm8k.yaml``: its filter list through ``build_filter_ensemble``, its metric
options through the registered ``exact_match``), or from the registered metric with the
options a task would set. reasoning-gym's are each task's ``score_answer`` on
``reasoning_gym.utils.extract_answer`` of the reply, on the entry as the dataset generated it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

Reward = Callable[[str, Mapping[str, Any]], float]


# -- Inspect AI ---------------------------------------------------------------------------------


def _state(reply: str, case: Mapping[str, Any]) -> Any:
    from inspect_ai.model import ModelOutput
    from inspect_ai.solver import TaskState

    choices = list(case.get("choices") or []) or None
    return TaskState(model="probe/reply", sample_id=0, epoch=1, input="", messages=[], choices=choices,
                     output=ModelOutput.from_content(model="probe/reply", content=reply))


_LOOP: list[asyncio.AbstractEventLoop] = []


def _run(coro: Any) -> Any:
    """Await *coro* on one event loop kept for the process (Inspect's scorers are coroutines)."""
    if not _LOOP:
        _LOOP.append(asyncio.new_event_loop())
    return _LOOP[0].run_until_complete(coro)


def inspect_reward(factory: Callable[[], Any], name: str, *, solver_choices: bool = False) -> Reward:
    """An Inspect AI scorer (built once by *factory*) as ``reward(reply, case)``."""
    from inspect_ai.scorer import Target, value_to_float

    scorer = factory()
    to_float = value_to_float()

    def reward(reply: str, case: Mapping[str, Any]) -> float:
        state = _state(reply, case)
        if solver_choices:  # what multiple_choice() does with the generated reply, before choice() scores it
            from inspect_ai.solver._multiple_choice import parse_answers, set_choices_based_on_generated_response

            set_choices_based_on_generated_response(state, parse_answers(state, multiple_correct=False))
        score = _run(scorer(state, Target(str(case["answer"]))))
        return float(to_float(score.value))

    reward.__name__ = reward.__qualname__ = name
    return reward


# -- lm-evaluation-harness --------------------------------------------------------------------


@cache
def _task_yaml(relative: str) -> dict[str, Any]:
    """A task configuration as the installed lm-eval ships it (``lm_eval/tasks/<relative>``)."""
    import lm_eval
    import yaml

    return dict(yaml.safe_load((Path(lm_eval.__file__).parent / "tasks" / relative).read_text()))


def lm_eval_reward(task_yaml: str | None, filter_name: str | None, metric_options: Mapping[str, Any] | None,
                   name: str) -> Reward:
    """lm-evaluation-harness's ``exact_match`` after the *filter_name* pipeline of the task configuration
    *task_yaml* (none: the reply as it is), with the task's own metric options, or *metric_options*.

    With a filter the reference is the case's answer as GSM8K writes its targets (``... #### <answer>``),
    so the task's ``regexes_to_ignore`` strip it exactly as they strip the dataset's targets.
    """
    from lm_eval.api.instance import Instance
    from lm_eval.api.registry import get_metric
    from lm_eval.filters import build_filter_ensemble

    config = _task_yaml(task_yaml) if task_yaml else {}
    ensemble = None
    if filter_name is not None:
        spec = next(f for f in config["filter_list"] if f["name"] == filter_name)
        components = [[step["function"], {k: v for k, v in step.items() if k != "function"}]
                      for step in spec["filter"]]
        ensemble = build_filter_ensemble(filter_name, components)
    if metric_options is None:  # the task's own options for its exact_match
        metric = next(m for m in config["metric_list"] if m["metric"] == "exact_match")
        metric_options = {k: v for k, v in metric.items() if k not in ("metric", "aggregation", "higher_is_better")}
    exact_match = get_metric("exact_match")
    options = dict(metric_options)

    def reward(reply: str, case: Mapping[str, Any]) -> float:
        prediction = reply
        if ensemble is not None:
            instance = Instance(request_type="generate_until", doc={}, arguments=("", {}), idx=0)
            instance.resps = [reply]
            ensemble.apply([instance])
            prediction = instance.filtered_resps[filter_name]
        target = f"{case.get('work', '')} #### {case['answer']}" if filter_name else str(case["answer"])
        return float(exact_match(predictions=[prediction], references=[target], **options)["exact_match"])

    reward.__name__ = reward.__qualname__ = name
    return reward


# -- reasoning-gym ----------------------------------------------------------------------------


@cache
def _dataset(task: str, seed: int, size: int) -> Any:
    import reasoning_gym

    return reasoning_gym.create_dataset(task, seed=seed, size=size)


def gym_reward(name: str = "score_answer") -> Reward:
    """The case's task's ``score_answer`` on ``reasoning_gym.utils.extract_answer(reply)``, as reasoning-gym's
    own training examples call it, with the entry the dataset generated for the case."""
    from reasoning_gym.utils import extract_answer

    def reward(reply: str, case: Mapping[str, Any]) -> float:
        source = case["dataset"]
        dataset = _dataset(case["category"], source["seed"], source["size"])
        entry = dataset[case["metadata"]["source_index"]]
        return float(dataset.score_answer(extract_answer(reply), entry))

    reward.__name__ = reward.__qualname__ = name
    return reward
