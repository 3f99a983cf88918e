"""The served-model flags (``--base-url``, ``--concurrency``, ``--api-key-env``) and what a row header says of one.

``rlgate sample`` and ``rlgate watch`` sample through an OpenAI-compatible endpoint when
given ``--base-url``; both declare its flags here, once, and describe the model the same way
in the rows' header: the engine ``served``, the server's own account of the model
(``/v1/models``: id, root, parent, context, revision), whether it honours ``seed``, and, where
the root is a folder on this machine, the same content hash ``--model DIR`` rows carry, so a
gate can tell "same weights, another engine" from "another model".
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..environment.contract import Env
from ..errors import UsageError
from ..options import Number
from ..policy.generate import SampleOptions, prompt_text
from ..policy.lora import check_adapter
from ..policy.served import API_KEY_ENV, DEFAULT_CONCURRENCY, ServedModel, warn_seed
from ..records import PromptItem
from ..train.cached import adapter_identity, base_identity

__all__ = ["add_served_arguments", "loaded_adapter", "served_from", "served_sampler"]

#: most requests in flight a command allows
MAX_CONCURRENCY = 4096


def add_served_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("served model: sample through an OpenAI-compatible endpoint (vLLM, SGLang, hosted)")
    g.add_argument("--base-url", metavar="URL",
                   help="the server's address, e.g. http://localhost:8000/v1; --model is then the name it serves "
                        "(GET URL/models lists them) and nothing is loaded here")
    g.add_argument("--concurrency", type=Number(1, MAX_CONCURRENCY, "8", integer=True), default=DEFAULT_CONCURRENCY,
                   help="requests in flight at once (%(default)s); does not change the rows")
    g.add_argument("--api-key-env", metavar="VAR", default=API_KEY_ENV,
                   help="the environment variable holding the server's API key (%(default)s); the key is sent to "
                        "--base-url only and never written anywhere")


def served_from(args: argparse.Namespace) -> ServedModel | None:
    """The served model the flags name, or None without ``--base-url``."""
    if getattr(args, "base_url", None) is None:
        return None
    if not args.model:
        raise UsageError("--base-url needs --model NAME: the name the server serves the model under (GET "
                         f"{args.base_url.rstrip('/')}/models lists them)")
    if getattr(args, "backend", "transformers") != "transformers":
        raise UsageError(f"--backend {args.backend} and --base-url both say where replies come from; drop one")
    return ServedModel(args.base_url, str(args.model), concurrency=args.concurrency, api_key_env=args.api_key_env)


def _local(root: object, maker: Any) -> dict[str, str] | str | None:
    """The content identity of *root* when it is a folder on this machine (the server's own path)."""
    if isinstance(root, str) and Path(root).is_dir():
        return maker(root)  # type: ignore[no-any-return]
    return None


def served_sampler(served: ServedModel, env: Env, items: list[PromptItem], sampling: SampleOptions, *,
                   adapter: str | None = None) -> dict[str, Any]:
    """The header's ``sampler.model``, ``sampler.adapter`` and ``sampler.served`` for *served*.

    ``served`` is what the server says (:meth:`ServedModel.identity`; no URL, so replicas of one
    model write one header and their shards merge) and whether it honours ``seed``, checked
    on the first prompt (a warning when it does not). *adapter* is the local folder an
    adapter was loaded from.
    """
    record = served.identity()
    record.pop("url", None)
    if items:
        record.update(served.seed_check(env.messages_for(prompt_text(items[0])), sampling,
                                        prompt=prompt_text(items[0])))
        warn_seed(served, record["seed"])
    is_adapter = record.get("parent") is not None
    base_root = record["base"]
    model = _local(base_root, base_identity) or {"served": record["parent"] if is_adapter else record["id"]}
    if adapter is not None:
        adapter_id: object = adapter_identity(adapter)
    elif is_adapter:
        adapter_id = _local(record.get("root"), adapter_identity) or {"served": record["id"]}
    else:
        adapter_id = None
    return {"model": model, "adapter": adapter_id, "backend": "served", "served": record}


@contextlib.contextmanager
def loaded_adapter(served: ServedModel, adapter: str | None) -> Iterator[ServedModel]:
    """*served*, or the adapter folder *adapter* loaded into its server under a name of its content
    (``POST /v1/load_lora_adapter``), unloaded when the block ends."""
    if adapter is None:
        yield served
        return
    check_adapter(adapter, flag="--adapter")
    name = f"rlgate-{hashlib.sha256(adapter_identity(adapter).encode()).hexdigest()[:12]}"
    loaded = served.load_adapter(name, str(Path(adapter).resolve()))
    try:
        yield loaded
    finally:
        served.unload_adapter(name)
