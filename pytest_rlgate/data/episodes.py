"""Episode rows: a graded row that also keeps what the agent did, turn by turn.

An episode row is an ordinary row (every gate, report and scan reads it as one) whose
``reply`` is the episode's text form (:attr:`~pytest_rlgate.environment.episode.Episode.text`)
and which also carries::

    {"transcript": [chat messages], "n_turns": int, "n_tool_calls": int, "stop": str,
     "turn_markers": [{name: number}, ...]}

``turn_markers[t]`` are the environment's markers of the episode as it stood after turn
``t``: where in an episode a guarded marker first fails. :func:`grade_episode` grades a
given transcript (an API model's, a log's) by replaying its assistant turns in a fresh
environment instance, so the tool results graded are the environment's, never the log's.
:func:`replayed_fields` does the same for an episode's text form (what ``rlgate grade`` and
:func:`~pytest_rlgate.data.rows.grade_replies` read): the row's ``reply`` is then the replayed
text, with the environment's tool results in place of whatever the text claimed, so a row
has the same shape whichever command made it.

Rows written before kept the counts as ``turns`` and ``tool_calls``; the row reader reads
those as ``n_turns`` and ``n_tool_calls`` (:data:`OLD_NAMES`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypedDict, cast

from ..environment.contract import Env, EnvSpec, load_env
from ..environment.episode import Episode, episode_from_messages, replay, split_turns
from ..errors import DataError, UsageError
from .grading import naming_the_row
from .records import Case, Markers, Row

__all__ = ["EPISODE_FIELDS", "OLD_NAMES", "EpisodeFields", "episode_fields", "grade_episode", "grade_episodes",
           "replayed_fields"]

#: the fields an episode row adds to a graded row
EPISODE_FIELDS: tuple[str, ...] = ("transcript", "n_turns", "n_tool_calls", "stop", "turn_markers")
#: the counts' names in rows written before they were named for what they hold
OLD_NAMES: dict[str, str] = {"turns": "n_turns", "tool_calls": "n_tool_calls"}


class EpisodeFields(TypedDict):
    """The graded fields of one episode: what :func:`grade_episode` returns and an episode row holds."""

    reply: str
    score: float
    reward: int
    markers: Markers
    transcript: list[dict[str, object]]
    n_turns: int
    n_tool_calls: int
    stop: str
    turn_markers: list[Markers]


def replayed_fields(env: Env, reply: str, case: Case, prompt: str) -> EpisodeFields:
    """The graded fields of an episode's text form: its assistant turns replayed from *prompt* in
    a fresh instance, so the transcript and the ``reply`` hold the environment's tool results."""
    episode, _ = replay(env, case, split_turns(reply), prompt)
    return episode_fields(env, episode, case)


def episode_fields(env: Env, episode: Episode, case: Case) -> EpisodeFields:
    """``reply``, ``score``, ``reward``, ``markers`` and the episode fields of one episode."""
    value = env.score(episode, case)
    return {
        "reply": episode.text,
        "score": value,
        "reward": int(env.passes(value)),
        "markers": env.markers(episode, case),
        **episode.as_dict(),
        "turn_markers": [env.markers(episode.upto(t), case) for t in range(episode.n_turns)],
    }


def grade_episode(env: EnvSpec, case: Case, transcript: Sequence[Mapping[str, object]] | str, *,
                  prompt: str = "") -> EpisodeFields:
    """Grade one given episode: *transcript* is a chat (the transformers / TRL message list) or
    an episode's text form; its assistant turns are replayed in a fresh instance of *env*
    (a text form from *prompt*, which the replayed transcript then starts with).

    Returns the graded fields of a row (``reply``, ``score``, ``reward``, ``markers``,
    ``transcript``, ``n_turns``, ``n_tool_calls``, ``stop``, ``turn_markers``).
    """
    __tracebackhide__ = True
    env = load_env(env)
    if not env.is_episodic:
        raise UsageError(f"environment {env.name} has no tools: grade its replies with grade_replies, "
                         "or name an episode environment (one with tools or an environment_factory)")
    if not isinstance(case, Mapping):
        raise DataError(f"the case must be an object, got {type(case).__name__}", path="<transcript>")
    if isinstance(transcript, str):
        return replayed_fields(env, transcript, case, prompt)
    episode, _ = episode_from_messages(env, case, transcript)
    return episode_fields(env, episode, case)


def grade_episodes(items: Sequence[Mapping[str, object]], episodes: Sequence[Sequence[Episode]], *,
                   env: EnvSpec = None, **meta: object) -> list[Row]:
    """Grade ``episodes[i]`` (the k episodes sampled for ``items[i]``) into episode rows."""
    env = load_env(env)
    if len(items) != len(episodes):
        raise UsageError(f"got {len(items)} items but {len(episodes)} episode lists")
    clash = sorted(set(meta) & {*Row.__required_keys__, *EPISODE_FIELDS, *OLD_NAMES, "scenario_id", "case"})
    if clash:
        raise UsageError(f"meta keys {clash} would overwrite graded fields")
    rows: list[Row] = []
    for position, (item, sampled) in enumerate(zip(items, episodes)):
        where = f"<items>[{position}]"
        prompt = item.get("prompt")
        if not isinstance(prompt, str) or not prompt:
            raise DataError("no 'prompt' string", path=where)
        own = item.get("case")
        case = env.case_for(prompt) if own is None else own
        if case is None:
            raise DataError(f"no 'case', and environment {env.name} reads none from the prompt; give the item "
                            "its case", path=where)
        if not isinstance(case, Mapping):
            raise DataError(f"'case' must be an object (what the episode is scored against), got "
                            f"{type(case).__name__}", path=where)
        category = env.category_of({**item, "case": case})
        if category is None:
            raise DataError(f"no 'category' (and its case names none); use one of {', '.join(env.categories)}",
                            path=where)
        env.check_category(category, path=where)
        for index, episode in enumerate(sampled):
            with naming_the_row(prompt, item.get("scenario_id"), index):
                graded = episode_fields(env, episode, case)
            rows.append(cast(Row, {"prompt": prompt, "scenario_id": item.get("scenario_id"), "category": category,
                                   "rollout_index": index, **graded, "case": dict(case), **meta}))  # graded here
    return rows
