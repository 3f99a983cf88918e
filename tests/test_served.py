"""Sampling through an OpenAI-compatible endpoint: rows, seeds, the header, adapters, and every fault in one line.

The server is ``tests/_openai_server.py``, started on a free local port per test: it honours
``seed`` like vLLM (a reply is a function of seed, model and chat) or shows one fault a real
server shows. The real vLLM server is exercised by ``tests/test_served_vllm.py`` in the slow step.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

pytest.importorskip("httpx")

from _openai_server import BASE, FakeServer, fake_server

from pytest_rlgate.cli import main
from pytest_rlgate.data.prompts import build_prompts, write_prompts
from pytest_rlgate.data.rows import load_rows, read_header
from pytest_rlgate.environment.contract import load_env
from pytest_rlgate.errors import EndpointError, RlgateWarning, UsageError
from pytest_rlgate.policy.load import load_policy
from pytest_rlgate.policy.sampling import sample, sample_rows
from pytest_rlgate.policy.served import ServedModel, wire_messages
from pytest_rlgate.watch.callback import GateCallback

FAST = ["--k", "2", "--max-new-tokens", "8", "--no-progress"]


@pytest.fixture(scope="module")
def prompts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("prompts") / "prompts.jsonl"
    write_prompts(path, build_prompts(0, "default")[:8])
    return path


def _served(fake: FakeServer, **settings: object) -> ServedModel:
    return ServedModel(fake.url, BASE, backoff=0.0, **settings)  # type: ignore[arg-type]


def _sample(fake: FakeServer, out: Path, prompts: Path, *extra: str, model: str = BASE) -> int:
    return main(["sample", "--base-url", fake.url, "--model", model, "--prompts-file", str(prompts), "--out", str(out),
                 *FAST, *extra])


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    lines = [line for line in err.splitlines() if not line.startswith("rlgate: RlgateWarning")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


# -- rows ------------------------------------------------------------------------------------


def test_rows_reproduce_on_a_rerun_and_do_not_depend_on_concurrency(prompts: Path, tmp_path: Path) -> None:
    with fake_server() as fake:
        assert _sample(fake, tmp_path / "a.jsonl", prompts, "--concurrency", "1") == 0
        assert _sample(fake, tmp_path / "b.jsonl", prompts, "--concurrency", "16") == 0
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    rows = load_rows(tmp_path / "a.jsonl")
    assert len(rows) == 16 and {r["reward"] for r in rows} == {0.0, 1.0}  # the fake's moves grade both ways
    chats = [r for r in fake.requests if "messages" in r and r["max_tokens"] == 8]
    assert all(r["n"] == 1 for r in chats)  # one request a reply: each reply its own seed
    assert len(chats) == 2 * (16 + 3)  # two runs of 16 replies, each after its 3-request seed check
    assert len({r["seed"] for r in chats}) == 16 + 1  # the same 16 seeds twice; the check's other seed


def test_a_reply_depends_on_its_seed_rollout_and_chat_only(tmp_path: Path) -> None:
    env = load_env("refund")
    items = build_prompts(0, "default")[:4]
    with fake_server() as fake:
        served = _served(fake)
        whole = sample(served, None, items, k=4, env=env, progress=False)
        alone = sample(served, None, items[2:3], k=4, env=env, progress=False)
        later = sample(served, None, items, k=2, first=2, env=env, progress=False)
    assert alone == whole[2:3]
    assert [row[2:] for row in whole] == later  # replies 2, 3 drawn alone extend k = 2 without resampling


def test_the_header_names_the_served_model_and_never_the_key(prompts: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLGATE_TEST_KEY", "sk-secret-123")
    out = tmp_path / "rows.jsonl"
    with fake_server() as fake:
        assert _sample(fake, out, prompts, "--api-key-env", "RLGATE_TEST_KEY") == 0
    header = read_header(out)
    assert header is not None
    served = header["sampler"]["served"]
    assert served["id"] == BASE and served["root"] == "/models/tiny-base" and served["parent"] is None
    assert served["seed"] == "honoured" and served["engine"] == "fake-1.0"
    assert header["sampler"]["backend"] == "served" and header["sampler"]["model"] == {"served": BASE}
    assert "url" not in served  # replicas of one model write one header (their shards merge)
    assert set(fake.auth) == {"Bearer sk-secret-123"}  # sent to the server ...
    assert "sk-secret" not in out.read_text()  # ... and written nowhere


def test_a_server_that_ignores_seed_is_named_in_a_warning_and_the_header(prompts: Path, tmp_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    with fake_server("ignore_seed") as fake, pytest.warns(RlgateWarning, match="ignores 'seed'"):
        assert _sample(fake, out, prompts) == 0
    header = read_header(out)
    assert header is not None and header["sampler"]["served"]["seed"] == "ignored"


def test_sample_rows_takes_a_served_model_like_a_loaded_one() -> None:
    items = build_prompts(0, "default")[:3]
    with fake_server() as fake:
        rows = sample_rows(_served(fake), None, items, k=2, progress=False)
    assert len(rows) == 6 and rows.header is not None and rows.header["sampling"]["k"] == 2


# -- faults: one line naming the URL, the prompt or the setting; nothing published ------------


@pytest.mark.parametrize(("mode", "expected"), [
    ("dead", "engine died"),
    ("always_500", "failed 3 times"),
    ("storm", "HTTP 429"),
    ("overflow", "--max-new-tokens"),
    ("not_json", "not JSON"),
    ("no_choices", "no 'choices'"),
    ("drop_n", "3 choices where n=1"),
])
def test_every_fault_is_one_line_and_publishes_nothing(mode: str, expected: str, prompts: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("pytest_rlgate.policy.served.RETRIES", 2)
    monkeypatch.setattr("pytest_rlgate.policy.served.BACKOFF", 0.0)
    out = tmp_path / "rows.jsonl"
    with fake_server(mode) as fake:
        assert _sample(fake, out, prompts) == 2
    line = _one_line(capsys)
    assert expected in line and fake.url in line
    assert not out.exists()  # nothing half-written published
    partial = out.with_name(out.name + ".partial")
    assert not partial.exists() or len(partial.read_text().splitlines()) == 1  # only its header: no rows


def test_a_refused_prompt_is_named(tmp_path: Path) -> None:
    with fake_server("overflow") as fake, pytest.raises(EndpointError) as caught:
        sample(_served(fake), None, ["My order ORD-123456 never came"], k=1, progress=False)
    assert "ORD-123456" in str(caught.value) and "maximum context length" in str(caught.value)


def test_a_dead_engine_is_not_retried(tmp_path: Path) -> None:
    with fake_server("dead") as fake, pytest.raises(EndpointError, match="engine died"):
        sample(_served(fake, retries=50, concurrency=1), None, ["hello"], k=1, progress=False)
    assert len(fake.requests) == 1


def test_retries_ride_out_a_rate_limit_and_a_flaky_500() -> None:
    items = build_prompts(0, "default")[:3]
    with fake_server() as fake:
        expected = sample(_served(fake), None, items, k=2, progress=False)
    for mode in ("storm_then_ok", "flaky_500"):
        with fake_server(mode, flaky=4) as fake:
            assert sample(_served(fake, concurrency=2), None, items, k=2, progress=False) == expected


def test_an_unreachable_server_is_one_line(prompts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with fake_server() as fake:
        url = fake.url
    assert main(["sample", "--base-url", url, "--model", BASE, "--prompts-file", str(prompts), "--out",
                 str(tmp_path / "rows.jsonl"), *FAST]) == 2
    line = _one_line(capsys)
    assert f"cannot reach {url}" in line and "--base-url" in line


def test_a_model_the_server_does_not_serve_is_refused_at_the_door(prompts: Path, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    with fake_server() as fake:
        assert _sample(fake, tmp_path / "rows.jsonl", prompts, model="qwen") == 2
    line = _one_line(capsys)
    assert "serves no model named 'qwen'" in line and BASE in line
    assert not fake.requests  # nothing sampled


def test_bad_flags_are_refused_at_the_door(prompts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sample", "--base-url", "localhost:8000", "--model", "m", "--prompts-file", str(prompts), "--out",
                 str(tmp_path / "r.jsonl")]) == 2
    assert "http://" in _one_line(capsys)
    with pytest.raises(UsageError, match="--concurrency"):
        ServedModel("http://localhost:8000/v1", "m", concurrency=0)
    assert ServedModel("http://user:pw@host:8000/", "m").url == "http://host:8000/v1"


# -- adapters --------------------------------------------------------------------------------


def _adapter(folder: Path, value: float = 1.0) -> Path:
    """A LoRA adapter folder as PEFT saves one (the fake server never reads its weights)."""
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file

    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": BASE, "r": 2,
                                                            "peft_type": "LORA", "target_modules": ["q_proj"]}))
    key = "base_model.model.layers.0.q_proj"
    save_file({f"{key}.lora_A.weight": torch.ones(2, 4), f"{key}.lora_B.weight": torch.full((4, 2), value)},
              str(folder / "adapter_model.safetensors"))
    return folder


def test_an_adapter_is_loaded_sampled_by_name_and_unloaded(prompts: Path, tmp_path: Path) -> None:
    adapter = _adapter(tmp_path / "ckpt")
    with fake_server() as fake:
        assert _sample(fake, tmp_path / "base.jsonl", prompts) == 0
        assert _sample(fake, tmp_path / "after.jsonl", prompts, "--adapter", str(adapter)) == 0
        loads = [r for r in fake.requests if "lora_path" in r]
        assert [r["lora_path"] for r in loads] == [str(adapter.resolve())]
        assert not fake.adapters  # unloaded after
        sampled = {r["model"] for r in fake.requests if "messages" in r}
    assert sampled == {BASE, loads[0]["lora_name"]}
    header = read_header(tmp_path / "after.jsonl")
    assert header is not None and header["sampler"]["served"]["parent"] == BASE
    assert main(["gate", str(tmp_path / "base.jsonl"), str(tmp_path / "after.jsonl")]) in (0, 1)


def test_a_gate_refuses_rows_of_two_served_base_models(prompts: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    with fake_server() as fake:
        assert _sample(fake, tmp_path / "a.jsonl", prompts) == 0
    with fake_server(root="/models/another") as fake:
        assert _sample(fake, tmp_path / "b.jsonl", prompts) == 0
    capsys.readouterr()
    assert main(["gate", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")]) == 2
    line = _one_line(capsys)
    assert "two different served models" in line and "--allow-model-change" in line
    assert main(["gate", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"), "--allow-model-change"]) in (0, 1)
    assert "model changed" in capsys.readouterr().out


# -- episodes over the API ---------------------------------------------------------------------


def test_a_tool_environment_runs_its_episode_loop_over_the_api(tmp_path: Path) -> None:
    env = load_env("refund_agent")
    items = [dict(item) for item in env.build_prompts(0, "small")][:2]
    with fake_server("tools") as fake:
        rows = sample_rows(_served(fake), None, items, env=env, k=2, progress=False)
        again = sample_rows(_served(fake), None, items, env=env, k=2, progress=False)
    assert [r["reply"] for r in rows] == [r["reply"] for r in again]
    first_turns = [r for r in fake.requests if "messages" in r and not any(m["role"] == "tool" for m in r["messages"])]
    assert first_turns and all(r["tools"][0]["type"] == "function" for r in first_turns)
    names = {tool["function"]["name"] for tool in first_turns[0]["tools"]}
    assert {"lookup_order", "issue_refund"} <= names
    follow = [r for r in fake.requests if "messages" in r and any(m["role"] == "tool" for m in r["messages"])]
    assert follow, "the tool results go back as tool messages"
    call = next(m for m in follow[0]["messages"] if m.get("tool_calls"))
    result = next(m for m in follow[0]["messages"] if m["role"] == "tool")
    assert isinstance(call["tool_calls"][0]["function"]["arguments"], str)  # the API's JSON string
    assert result["tool_call_id"] == call["tool_calls"][0]["id"]
    assert all(r["n_tool_calls"] >= 1 for r in rows)


def test_an_episode_the_context_can_no_longer_hold_stops_at_its_budget() -> None:
    env = load_env("refund_agent")
    items = [dict(item) for item in env.build_prompts(0, "small")][:2]
    with fake_server("tools_overflow") as fake:
        rows = sample_rows(_served(fake), None, items, env=env, k=1, progress=False)
    assert [r["stop"] for r in rows] == ["budget", "budget"] and all(r["n_tool_calls"] == 1 for r in rows)
    with fake_server("overflow") as fake, pytest.raises(EndpointError, match="maximum context length"):
        sample_rows(_served(fake), None, items, env=env, k=1, progress=False)  # the first turn: refused


def test_wire_messages_pair_each_result_with_its_call() -> None:
    chat = [{"role": "user", "content": "hi"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": "a", "arguments": {"x": 1}}},
                {"type": "function", "function": {"name": "b", "arguments": {}}}]},
            {"role": "tool", "name": "a", "content": "1"}, {"role": "tool", "name": "b", "content": "2"}]
    wire = wire_messages(chat)
    ids = [c["id"] for c in wire[1]["tool_calls"]]  # type: ignore[index]
    assert [m["tool_call_id"] for m in wire[2:]] == ids and wire[1]["content"] is None
    assert wire[1]["tool_calls"][0]["function"]["arguments"] == '{"x": 1}'  # type: ignore[index]


def test_no_warning_for_a_server_that_honours_seed(prompts: Path, tmp_path: Path) -> None:
    with fake_server() as fake, warnings.catch_warnings():
        warnings.simplefilter("error", RlgateWarning)
        assert _sample(fake, tmp_path / "rows.jsonl", prompts) == 0


def test_a_watched_run_gates_adapters_loaded_into_the_live_server(prompts: Path, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    ckpts = tmp_path / "job"
    for step, value in ((10, 0.5), (20, 2.0)):
        folder = _adapter(ckpts / f"checkpoint-{step}", value)
        (folder / "trainer_state.json").write_text("{}")
    with fake_server() as fake:
        code = main(["watch", str(ckpts), "--base-url", fake.url, "--base-model", BASE, "--prompts-file", str(prompts),
                     "--k", "2", "--max-new-tokens", "8", "--no-progress"])
        assert code in (0, 1), capsys.readouterr().err
        loads = [r for r in fake.requests if "lora_path" in r]
        assert [Path(r["lora_path"]).name for r in loads][:2] == ["checkpoint-10", "checkpoint-20"]
        assert not fake.adapters  # each unloaded after its look
        sampled = [r["model"] for r in fake.requests if "messages" in r]
    assert sampled[0] == BASE and {r["lora_name"] for r in loads} <= set(sampled)
    watch = ckpts / "rlgate-watch"
    step0, step20 = read_header(watch / "step-000000.jsonl"), read_header(watch / "step-000020.jsonl")
    assert step0 is not None and step20 is not None
    assert step0["sampler"]["served"]["parent"] is None and step20["sampler"]["served"]["parent"] == BASE
    assert step20["sampler"]["model"] == step0["sampler"]["model"]  # one base, two adapters on it
    assert "look 2 (checkpoint-20" in capsys.readouterr().out


def test_a_watch_through_a_server_refuses_full_weight_checkpoints(prompts: Path, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    full = tmp_path / "job" / "checkpoint-5"
    full.mkdir(parents=True)
    (full / "config.json").write_text("{}")
    (full / "model.safetensors").write_bytes(b"x")
    with fake_server() as fake:
        assert main(["watch", str(tmp_path / "job"), "--base-url", fake.url, "--base-model", BASE, "--prompts-file",
                     str(prompts), "--no-progress"]) == 2
    assert "LoRA adapters only" in _one_line(capsys)


def test_gate_callback_gates_each_look_as_an_adapter_loaded_into_the_trainers_server(tmp_path: Path) -> None:
    pytest.importorskip("peft")
    from types import SimpleNamespace

    from peft import LoraConfig, get_peft_model


    model, _tokenizer = load_policy("rlgate/tiny-refund", device="cpu")
    policy = get_peft_model(model, LoraConfig(r=2, target_modules="all-linear"))
    items = build_prompts(0, "default")[:6]
    state = SimpleNamespace(global_step=0, max_steps=2, log_history=[])
    control = SimpleNamespace(should_training_stop=False)
    with fake_server() as fake:
        gate = GateCallback(items, env="refund", every=1, out_dir=tmp_path, served=_served(fake), k=2,
                            max_new_tokens=8)
        gate.on_train_begin(SimpleNamespace(), state, control, model=policy)
        state.global_step = 1
        gate.on_step_end(SimpleNamespace(), state, control, model=policy)
        loads = [r for r in fake.requests if "lora_path" in r]
        assert not fake.adapters  # unloaded after the look
        sampled = [r["model"] for r in fake.requests if "messages" in r]
    assert [Path(r["lora_path"]) for r in loads] == [(tmp_path / "adapters" / "step-000001").resolve()]
    assert sampled[0] == BASE and sampled[-1] == loads[0]["lora_name"]  # step 0 the base, the look the adapter
    assert [look.step for look in gate.looks] == [1]
    assert (tmp_path / "step-000000.jsonl").is_file() and (tmp_path / "step-000001.jsonl").is_file()


SERVED_SUITE = '''
import pytest

@pytest.mark.rlgate(size="small", k=2, max_new_tokens=8, base_runs=2)
def test_rows(rlgate_before_rows, rlgate_after_rows):
    assert {r["sample_seed"] for r in rlgate_before_rows} == {17, 18}
    assert len(rlgate_after_rows) * 2 == len(rlgate_before_rows)
'''


def test_the_fixtures_sample_a_handed_in_adapter_through_the_server(pytester: pytest.Pytester, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLGATE_CACHE_DIR", str(tmp_path / "cache"))
    adapter = _adapter(tmp_path / "adapter")
    pytester.makepyfile(test_served_rows=SERVED_SUITE)
    with fake_server() as fake:
        result = pytester.runpytest_inprocess("-p", "no:cacheprovider", f"--rlgate-adapter={adapter}",
                                              f"--rlgate-base-model={BASE}", f"--rlgate-base-url={fake.url}")
        result.assert_outcomes(passed=1)
        sampled = {r["model"] for r in fake.requests if "messages" in r}
        assert [Path(r["lora_path"]) for r in fake.requests if "lora_path" in r] == [adapter.resolve()]
        assert not fake.adapters
    assert BASE in sampled and len(sampled) == 2  # the base, and the adapter by its loaded name
