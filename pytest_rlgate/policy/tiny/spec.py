"""A tiny-policy build spec: what an environment hands the one builder to make its policy.

The builder (:mod:`.build`) knows no task. An environment that wants a CPU policy of its own
exposes ``tiny_policy = TinySpec(...)`` next to ``base_model = "rlgate/tiny-<name>"``:
its corpus (a dialogue writer), the reply mix, the tokens to add whole (refund's order ids,
the system prompt), whether to install the copy head, and the sizes. Its JSON
(:meth:`TinySpec.as_dict`) is recorded beside the built weights, so a shipped policy says
exactly how it was made.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field

from ...environment.contract import Env
from ...errors import UsageError
from .corpus import Corpus, ReplyMix
from .model import ModelShape
from .tokenizer import CHAT_TEMPLATE
from .warmstart import TrainSchedule

__all__ = ["TINY_POLICY", "TINY_PREFIX", "TinySpec", "digest", "spec_of"]

#: Every tiny policy is addressed like a hub id: ``rlgate/tiny-<environment>``.
TINY_PREFIX = "rlgate/tiny-"
#: The default tiny policy (shipped built, never downloaded): refund's, the environment the
#: examples and the demo train.
TINY_POLICY = TINY_PREFIX + "refund"
_NAME = re.compile(re.escape(TINY_PREFIX) + r"[a-z0-9][a-z0-9_-]*")


def digest(value: object) -> str:
    """SHA-256 of *value*'s canonical JSON: how a spec records long lists and the tables its
    corpus draws from, so a changed text changes the record (and a local build's cache key)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class TinySpec:
    """Everything that determines an environment's built tiny policy (with the library versions).

    :param name: the address, ``rlgate/tiny-<environment>``; shipped policies live in
        ``pytest_rlgate/policy/shipped/tiny-<environment>/``.
    :param corpus: the environment's warm-start texts (:class:`~.corpus.Corpus`).
    :param mix: category shares and reply-kind shares per category.
    :param words: tokens added whole (matched as whole words), e.g. refund's order ids.
    :param phrases: tokens added verbatim, e.g. the system prompt (one position, not ~200).
    :param copy_head: install the hand-built copy head over *words* (:mod:`.copyhead`); each
        word must then end in four digits.
    :param copy_values: tokens added whole and copied by identity through the copy head's
        value head, e.g. the agent's order amounts, carried from a tool result to a call.
    :param tokenizer_dialogues: how many corpus dialogues (prompts and replies) train the BPE.
    :param chat_template: the tokenizer's chat template (ChatML; an agent's renders tools).
    """

    name: str
    corpus: Corpus
    mix: ReplyMix
    words: tuple[str, ...] = ()
    phrases: tuple[str, ...] = ()
    copy_head: bool = False
    copy_values: tuple[str, ...] = ()
    seed: int = 0
    vocab_size: int = 512
    tokenizer_dialogues: int = 8000
    shape: ModelShape = field(default_factory=ModelShape)
    schedule: TrainSchedule = field(default_factory=TrainSchedule)
    version: int = 1  # bump when the builder's code changes what a spec builds
    chat_template: str = CHAT_TEMPLATE

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise ValueError(f"TinySpec.name must look like '{TINY_PREFIX}<environment>' "
                             f"(lower case, digits, - or _), got {self.name!r}")
        if self.copy_head and not self.words:
            raise ValueError("TinySpec: copy_head=True needs words (the code tokens it copies)")
        if self.copy_values and not self.copy_head:
            raise ValueError("TinySpec: copy_values are copied by the copy head; set copy_head=True")

    @property
    def folder_name(self) -> str:
        """The shipped folder's name: the part after ``rlgate/``."""
        return self.name.split("/", 1)[1]

    def as_dict(self) -> dict[str, object]:
        """JSON of the spec; long token lists are recorded by count and SHA-256."""
        return {
            "name": self.name,
            "version": self.version,
            "seed": self.seed,
            "vocab_size": self.vocab_size,
            "tokenizer_dialogues": self.tokenizer_dialogues,
            "words": {"count": len(self.words), "sha256": digest(self.words)},
            "phrases": [digest(p) for p in self.phrases],
            "copy_head": self.copy_head,
            **({"copy_values": list(self.copy_values)} if self.copy_values else {}),
            "shape": asdict(self.shape),
            "schedule": asdict(self.schedule),
            "mix": self.mix.as_dict(),
            "corpus": {"kind": type(self.corpus).__qualname__, **self.corpus.describe()},
            **({} if self.chat_template == CHAT_TEMPLATE else {"chat_template": digest(self.chat_template)}),
        }


def spec_of(env: Env) -> TinySpec:
    """The environment's ``tiny_policy`` spec, or a :class:`UsageError` saying how to add one."""
    spec = env.tiny_policy
    if not isinstance(spec, TinySpec):
        tools = (" (a tool environment: `rlgate policy build --env SPEC --out DIR` builds a tiny agent from its "
                 "prompts and tools)" if env.is_episodic else "")
        raise UsageError(f"environment {env.name} has no tiny policy spec (a 'tiny_policy' TinySpec "
                         f"attribute, see docs/policy.md){tools}; add one, or train from --base-model MODEL")
    return spec
