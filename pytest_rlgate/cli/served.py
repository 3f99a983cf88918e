"""The served-model flags (``--base-url``, ``--concurrency``, ``--api-key-env``) and what a row header says of one.

``rlgate sample`` and ``rlgate watch`` sample through an OpenAI-compatible endpoint when
given ``--base-url``; both declare its flags here, once, and describe the model the same way
in the rows' header (:func:`~pytest_rlgate.train.cached.served_identity`).
"""

from __future__ import annotations

import argparse

from ..errors import UsageError
from ..options import Number
from ..policy.served import API_KEY_ENV, DEFAULT_CONCURRENCY, ServedModel

__all__ = ["add_served_arguments", "served_from"]

#: most requests in flight a command allows
MAX_CONCURRENCY = 4096


def add_served_arguments(parser: argparse.ArgumentParser, model_flag: str = "--model") -> None:
    """Declare the served-model flags; *model_flag* is the command's flag that names the served model."""
    g = parser.add_argument_group("served model: sample through an OpenAI-compatible endpoint (vLLM, SGLang, hosted)")
    g.add_argument("--base-url", metavar="URL",
                   help=f"the server's address, e.g. http://localhost:8000/v1; {model_flag} is then the name it "
                        "serves (GET URL/models lists them) and nothing is loaded here")
    g.add_argument("--concurrency", type=Number(1, MAX_CONCURRENCY, "8", integer=True), default=DEFAULT_CONCURRENCY,
                   metavar="N",
                   help="requests in flight at once (%(default)s); does not change the rows")
    g.add_argument("--api-key-env", metavar="VAR", default=API_KEY_ENV,
                   help="the environment variable holding the server's API key (%(default)s); the key is sent to "
                        "--base-url only and never written anywhere")


def served_from(args: argparse.Namespace, name: str | None, flag: str = "--model") -> ServedModel | None:
    """The served model the flags name (*name*: the one *flag* gives), or None without ``--base-url``."""
    if getattr(args, "base_url", None) is None:
        return None
    if not name:
        raise UsageError(f"--base-url needs {flag} NAME: the name the server serves the model under (GET "
                         f"{args.base_url.rstrip('/')}/models lists them)")
    if getattr(args, "backend", "transformers") != "transformers":
        raise UsageError(f"--backend {args.backend} and --base-url both say where replies come from; drop one")
    return ServedModel(args.base_url, str(name), concurrency=args.concurrency, api_key_env=args.api_key_env)
