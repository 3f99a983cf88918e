"""What the samplers accept as a policy, named once for every sampler's signature."""

from __future__ import annotations

from typing import TYPE_CHECKING, Union

from .generate import VllmSampler
from .handles import PolicyFunction
from .served import ServedModel

if TYPE_CHECKING:
    from .handles import Model

__all__ = ["Policy"]

#: a loaded model, a vLLM sampler, a model behind an OpenAI-compatible endpoint, a callable, or
#: (vLLM backend only) a model name or folder
Policy = Union["Model", VllmSampler, ServedModel, PolicyFunction, str]
