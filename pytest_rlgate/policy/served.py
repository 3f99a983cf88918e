"""Sampling through a server that speaks the OpenAI chat-completions API: vLLM, SGLang, a hosted model.

A team that fine-tunes a 1.5B-8B model already serves it behind such an endpoint, so a
:class:`ServedModel` is a policy like a loaded model: :func:`~pytest_rlgate.policy.sampling.sample`,
``sample_rows``, the episode loop and ``rlgate sample --base-url URL --model NAME`` take one.

Seeds: reply ``j`` of a chat is its own request (``n`` = 1) with the seed
:func:`~pytest_rlgate.policy.generate.reply_seed` gives ``(seed, j, the chat as JSON)``, the
derivation the local sampler uses with the rendered chat. So a reply depends on nothing else
sampled (not on k, the batch, the concurrency or the order of answers), a server that honours
``seed`` gives the same rows on a rerun, and later replies of a prompt (``first``) extend rows
without resampling them. :meth:`ServedModel.seed_check` asks once whether the server honours
it; a server that does not is named in a warning and in the rows' header.

Failures are the server's, not the user's data, but they read the same way: one
:class:`~pytest_rlgate.errors.EndpointError` line naming the URL, the prompt or the setting,
and what to change. Rate limits (429), overload (502-504), a bare 500 and timeouts are
retried with exponential backoff, at most *retries* times a request; a dead engine (vLLM's
``EngineDeadError``: every later request gets a 500) stops at once, since retrying it only
burns the budget; a refused prompt (400, e.g. a context overflow) is reported with the prompt.
On the first failure every request still in flight is cancelled, so nothing half-sampled is
published: the caller's resume journal keeps only whole pieces.

The API key is read from an environment variable (*api_key_env*) when a request is sent; it is
never stored on the object, in a header, a row or a message.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import json
import os
import random
import warnings
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from .._io.progress import bar
from ..errors import EndpointError, RlgateWarning, UsageError
from .generate import SampleOptions, prompt_text, reply_seed, request_params
from .handles import Message, Prompts
from .identity import adapter_identity, base_identity

if TYPE_CHECKING:
    import httpx

    from ..environment.contract import Env
    from ..records import PromptItem

__all__ = ["API_KEY_ENV", "DEFAULT_CONCURRENCY", "Overflow", "ServedModel", "Turn", "adapter_name", "chat_key",
           "served_identity", "wire_messages"]

T = TypeVar("T")

#: Where the API key is read from unless told: the variable OpenAI-compatible clients read.
API_KEY_ENV = "OPENAI_API_KEY"
#: Requests in flight at once: enough to fill a small server's batch, few enough for a hosted rate limit.
DEFAULT_CONCURRENCY = 8
#: Retries of one request after its first try (429, 500, 502-504, time-outs, dropped connections).
RETRIES = 6
#: The first wait before a retry, in seconds; it doubles each time (with jitter), so six retries wait ~1 min.
BACKOFF = 1.0
#: The longest wait a server's ``Retry-After`` may ask for (seconds); longer asks are capped.
MAX_WAIT = 60.0
#: Seconds one request may take (a long reply from a loaded CPU server takes minutes).
TIMEOUT = 600.0
_RETRIED = frozenset({429, 500, 502, 503, 504})
#: What a vLLM server answers once its engine died: every later request fails the same way.
_DEAD = ("EngineDeadError", "engine is dead", "Engine loop is not running", "EngineCore encountered an issue")
_OVERFLOW = ("maximum context length", "context length", "too long", "max_model_len", "maximum input length")


def _short(text: object, width: int = 60) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def chat_key(messages: Sequence[Message], tools: Sequence[Mapping[str, object]] | None) -> str:
    """The chat as the seed reads it: its messages and tools as canonical JSON (the server renders
    the template, so this stands where the local sampler reads the rendered text)."""
    return json.dumps({"messages": list(messages), "tools": list(tools or ())}, sort_keys=True, ensure_ascii=False,
                      default=str)


def wire_messages(messages: Sequence[Message]) -> list[dict[str, object]]:
    """An episode's chat (the transformers / TRL shape) as the chat-completions API takes it: each
    assistant call with an ``id`` and its arguments as a JSON string, each tool result answering
    the call it follows by ``tool_call_id``."""
    out: list[dict[str, object]] = []
    pending: list[str] = []
    for number, message in enumerate(messages):
        wire = {key: value for key, value in message.items() if key != "tool_calls"}
        calls = message.get("tool_calls")
        if message.get("role") == "assistant" and isinstance(calls, (list, tuple)) and calls:
            wire_calls = []
            pending = []
            for index, call in enumerate(calls):
                function = call.get("function", call) if isinstance(call, Mapping) else {}
                function = function if isinstance(function, Mapping) else {}
                arguments = function.get("arguments", {})
                ident = f"call_{number}_{index}"
                pending.append(ident)
                wire_calls.append({"id": ident, "type": "function", "function": {
                    "name": str(function.get("name")),
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments, sort_keys=True)}})
            wire["tool_calls"] = wire_calls
            if not wire.get("content"):
                wire["content"] = None
        elif message.get("role") == "tool":
            wire["tool_call_id"] = pending.pop(0) if pending else f"call_{number}"
        out.append(wire)
    return out


def tool_schemas(functions: Sequence[Callable[..., object]]) -> list[dict[str, Any]]:
    """The environment's tools as the API's ``tools``: the JSON schemas chat templates render."""
    from transformers.utils import get_json_schema

    return [get_json_schema(fn) for fn in functions]


@dataclass(frozen=True)
class Turn:
    """One request: a chat, its seed, and what the reply is for (named in errors)."""

    messages: Sequence[Message]
    seed: int
    prompt: str


class Overflow:
    """A turn the server refused as too long for its context: the episode loop stops that episode
    there, as the local loop stops one whose context is full (the token budget)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


@dataclass(frozen=True)
class ServedModel:
    """A model behind an OpenAI-compatible endpoint, sampled as a policy.

    ``ServedModel("http://localhost:8000/v1", "smollm2")``; *model* is the name the server
    serves it under (``--served-model-name``, or a LoRA adapter's name). *concurrency* bounds
    the requests in flight; *retries* (unset: :data:`RETRIES`), *backoff* (the first wait before a
    retry, doubling each time; unset: :data:`BACKOFF`) and *timeout* bound what one request may
    cost; *api_key_env* names the variable the key is read from (none set: no key is sent).
    """

    base_url: str
    model: str
    concurrency: int = DEFAULT_CONCURRENCY
    api_key_env: str = API_KEY_ENV
    retries: int = -1
    backoff: float = -1.0
    timeout: float = TIMEOUT

    def __post_init__(self) -> None:
        if self.retries == -1:  # unset: the module's defaults, read when built
            object.__setattr__(self, "retries", RETRIES)
        if self.backoff == -1.0:
            object.__setattr__(self, "backoff", BACKOFF)
        if not isinstance(self.base_url, str) or not self.base_url.strip():
            raise UsageError("--base-url: give the server's address, e.g. http://localhost:8000/v1")
        parts = urlsplit(self.base_url.strip())
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise UsageError(f"--base-url {_short(self.base_url)!r}: an http:// or https:// address, e.g. "
                             "http://localhost:8000/v1")
        path = parts.path.rstrip("/") or "/v1"
        object.__setattr__(self, "base_url", urlunsplit((parts.scheme, parts.netloc, path, "", "")))
        if not isinstance(self.model, str) or not self.model:
            raise UsageError("--model: the name the server serves the model under (its /v1/models lists them)")
        if isinstance(self.concurrency, bool) or not isinstance(self.concurrency, int) or not 1 <= self.concurrency:
            raise UsageError(f"--concurrency {self.concurrency!r}: requests in flight at once, an integer >= 1")
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) or self.retries < 0:
            raise UsageError(f"retries={self.retries!r}: retries of a failed request, an integer >= 0")
        if not self.timeout > 0 or not self.backoff >= 0:
            raise UsageError(f"timeout={self.timeout!r} must be > 0 and backoff={self.backoff!r} >= 0")

    @property
    def url(self) -> str:
        """The address as rows and messages name it: no credentials, no query."""
        parts = urlsplit(self.base_url)
        host = parts.netloc.rsplit("@", 1)[-1]
        return urlunsplit((parts.scheme, host, parts.path, "", ""))

    def _payload(self, messages: Sequence[Message], seed: int, sampling: SampleOptions,
                 tools: Sequence[Mapping[str, object]] | None = None) -> dict[str, Any]:
        """One chat-completions request: one reply (``n`` = 1) on its own seed."""
        payload = {"model": self.model, "messages": wire_messages(messages), **request_params(sampling, seed=seed)}
        if tools:
            payload["tools"] = list(tools)
        return payload

    def with_model(self, model: str) -> ServedModel:
        """The same server, sampling another of its models (an adapter loaded into it)."""
        return dataclasses.replace(self, model=model)

    # -- what the server says it serves -------------------------------------------------------

    def models(self) -> list[dict[str, Any]]:
        """``GET /v1/models``: every model the server serves, as it describes them."""
        found = _run(self, lambda session: session.request("GET", "/models", None,
                                                           what="listing its models (GET /models)", retries=0))
        data = found.get("data") if isinstance(found, Mapping) else None
        if not isinstance(data, list) or not all(isinstance(m, Mapping) and isinstance(m.get("id"), str)
                                                 for m in data):
            raise EndpointError(f"{self.url}/models answered {_short(found)!r}, not a list of models "
                                "({'data': [{'id': ...}, ...]}); is this an OpenAI-compatible server?")
        return [dict(m) for m in data]

    def identity(self) -> dict[str, Any]:
        """What the server says this model is: its id, root (the weights' path or name), parent
        (an adapter's base), context length and any revision it reports; the URL it answers at.

        A model the server does not list is refused here, before anything is sampled.
        """
        listed = self.models()
        entry = next((m for m in listed if m["id"] == self.model), None)
        if entry is None:
            names = ", ".join(m["id"] for m in listed[:8]) or "nothing"
            raise EndpointError(f"{self.url} serves no model named {self.model!r} (it serves {names}); pass --model "
                                "one of those names (a LoRA adapter is listed once loaded)")
        record: dict[str, Any] = {"url": self.url, "id": entry["id"], "root": entry.get("root"),
                                  "parent": entry.get("parent")}
        for key in ("revision", "version", "max_model_len", "owned_by"):
            if entry.get(key) is not None:
                record[key] = entry[key]
        base = next((m for m in listed if m["id"] == record["parent"]), None) if record["parent"] else None
        record["base"] = (base or entry).get("root") or (base or entry)["id"]
        return record

    def base(self) -> ServedModel:
        """The model an adapter was loaded on (what ``adapter=False`` samples); itself for a base."""
        parent = self.identity()["parent"]
        return self.with_model(parent) if isinstance(parent, str) and parent else self

    def seed_check(self, messages: Sequence[Message], sampling: SampleOptions, *, prompt: str = "") -> dict[str, Any]:
        """Whether the server honours ``seed`` (``honoured``, ``ignored`` or ``untested``), and the
        engine build it reports (``system_fingerprint``), from three short requests.

        The same seed twice, then another: one seed answering two different replies means the
        server drops ``seed``, so its rows will not reproduce. At temperature 0, or when all three
        agree, it cannot be told (``untested``).
        """
        probe = dataclasses.replace(sampling, max_new_tokens=min(16, sampling.max_new_tokens))
        seed = reply_seed(sampling.seed, 0, chat_key(messages, None))
        seeds = (seed,) if sampling.temperature == 0 else (seed, seed, seed ^ 1)

        async def one(session: _Session, value: int) -> tuple[str, object]:
            try:
                answer = await session.request("POST", "/chat/completions", self._payload(messages, value, probe),
                                               what=f"checking that it honours 'seed' on prompt {_short(prompt)!r}")
            except _Refused as refused:
                raise refused.error from None
            engine = answer.get("system_fingerprint") if isinstance(answer, Mapping) else None
            return _text(_message(answer, self.url, prompt)), engine

        found = _run(self, lambda session: session.each(seeds, one))
        texts = [text for text, _ in found]
        if len(texts) == 1 or texts[0] == texts[1] == texts[2]:
            verdict = "untested"
        else:
            verdict = "honoured" if texts[0] == texts[1] else "ignored"
        engine = found[0][1]
        return {"seed": verdict, "engine": engine if isinstance(engine, str) else None}

    # -- sampling ------------------------------------------------------------------------------

    def chat(self, turns: Sequence[Turn], sampling: SampleOptions, *, tools: Sequence[Mapping[str, object]] | None
             = None, progress: bool | None = None, desc: str = "sampling", overflow_ends: bool = False,
             ) -> list[dict[str, Any] | Overflow]:
        """The assistant's message for each turn (``content`` and ``tool_calls``, arguments decoded),
        *concurrency* requests at a time, in the turns' order.

        With *overflow_ends* a turn the server refuses as longer than its context comes back as
        :class:`Overflow` (an episode stops there); otherwise it fails the call.
        """
        shown = bar(len(turns), desc, progress, unit="reply", leave=False)

        async def one(session: _Session, turn: Turn) -> dict[str, Any] | Overflow:
            try:
                answer = await session.request("POST", "/chat/completions",
                                               self._payload(turn.messages, turn.seed, sampling, tools),
                                               what=f"sampling prompt {_short(turn.prompt)!r}")
            except _Refused as refused:
                if overflow_ends and refused.overflow:
                    return Overflow(refused.reason)
                raise refused.error from None
            message = _message(answer, self.url, turn.prompt)
            shown.update(1)
            return message

        try:
            return _run(self, lambda session: session.each(turns, one))
        finally:
            shown.close()

    def sample(self, prompts: Prompts, sampling: SampleOptions, *, env: Env, progress: bool | None = None,
               desc: str = "sampling") -> list[list[str]]:
        """``replies[i]`` = replies ``first .. first + k - 1`` to ``prompts[i]`` (one-turn sampling)."""
        chats = [env.messages_for(prompt_text(p)) for p in prompts]
        turns = [Turn(chat, reply_seed(sampling.seed, j, chat_key(chat, None)), prompt_text(p))
                 for p, chat in zip(prompts, chats) for j in range(sampling.first, sampling.first + sampling.k)]
        messages = self.chat(turns, sampling, progress=progress, desc=desc)
        texts = [_text(m) for m in messages]
        return [texts[i * sampling.k:(i + 1) * sampling.k] for i in range(len(prompts))]

    # -- adapters (vLLM's runtime LoRA endpoints) ------------------------------------------------

    def load_adapter(self, name: str, path: str) -> ServedModel:
        """``POST /v1/load_lora_adapter``: the server loads the adapter folder *path* (a path on the
        server's machine) as *name*; the :class:`ServedModel` that samples it."""
        what = f"loading adapter {path} as {name!r} (POST /load_lora_adapter)"
        try:
            _run(self, lambda session: session.request("POST", "/load_lora_adapter",
                                                       {"lora_name": name, "lora_path": path}, what=what, retries=0,
                                                       adapter=True))
        except EndpointError as exc:
            if "already" not in str(exc):  # loaded by a run that stopped early: the name is the content's
                raise
        return self.with_model(name)

    @contextlib.contextmanager
    def loaded(self, name: str, path: str | os.PathLike[str]) -> Iterator[ServedModel]:
        """The adapter folder *path* loaded into the server as *name* for the block (unloaded after):
        how a checkpoint is sampled without reloading the base. Name it by its content, so a run
        stopped before unloading finds it loaded with the same weights."""
        loaded = self.load_adapter(name, str(Path(path).resolve()))
        try:
            yield loaded
        finally:
            self.unload_adapter(name)

    def unload_adapter(self, name: str) -> None:
        """``POST /v1/unload_lora_adapter``: the server drops adapter *name*."""
        what = f"unloading adapter {name!r} (POST /unload_lora_adapter)"
        _run(self, lambda session: session.request("POST", "/unload_lora_adapter", {"lora_name": name}, what=what,
                                                   retries=0, adapter=True))


def _text(message: Mapping[str, Any] | Overflow) -> str:
    """A one-turn reply's text: its content, with any calls the server parsed out written back as
    the ``<tool_call>`` blocks the environment reads."""
    if isinstance(message, Overflow):
        return ""
    text = str(message.get("content") or "")
    for call in message.get("tool_calls") or ():
        block = json.dumps({"name": call["function"]["name"], "arguments": call["function"]["arguments"]})
        text = f"{text}\n<tool_call>\n{block}\n</tool_call>" if text else f"<tool_call>\n{block}\n</tool_call>"
    return text


def _message(answer: object, url: str, prompt: str) -> dict[str, Any]:
    """The one assistant message of a chat-completions answer, checked; arguments decoded."""
    where = f"{url}/chat/completions answered prompt {_short(prompt)!r} with"
    choices = answer.get("choices") if isinstance(answer, Mapping) else None
    if not isinstance(choices, list):
        raise EndpointError(f"{where} no 'choices' list ({_short(answer, 80)!r}); is this an OpenAI-compatible "
                            "chat-completions server?")
    if len(choices) != 1:
        raise EndpointError(f"{where} {len(choices)} choices where n=1 asked for one; the server does not honour "
                            "'n', so its replies cannot be seeded one by one")
    message = choices[0].get("message") if isinstance(choices[0], Mapping) else None
    content = message.get("content") if isinstance(message, Mapping) else None
    if not isinstance(message, Mapping) or not (content is None or isinstance(content, str)):
        raise EndpointError(f"{where} a choice without a message whose 'content' is text ({_short(choices[0], 80)!r})")
    calls = []
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, Mapping) else None
        name = function.get("name") if isinstance(function, Mapping) else None
        if not isinstance(name, str):
            raise EndpointError(f"{where} a tool call without a function name ({_short(call, 80)!r})")
        arguments = function.get("arguments") if isinstance(function, Mapping) else None
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except ValueError:
                arguments = {"_unparsed": arguments}  # the environment's tool answers the bad call, as locally
        calls.append({"type": "function", "function": {"name": name,
                                                       "arguments": arguments if isinstance(arguments, Mapping)
                                                       else {}}})
    out: dict[str, Any] = {"role": "assistant", "content": content or ""}
    if calls:
        out["tool_calls"] = calls
    return out


class _Refused(Exception):
    """A request the server refused for good (4xx): the error, and whether it was a context overflow."""

    def __init__(self, error: EndpointError, reason: str, overflow: bool) -> None:
        super().__init__(str(error))
        self.error, self.reason, self.overflow = error, reason, overflow


def _reason(response: httpx.Response) -> str:
    """The server's own words for a failed request (its JSON error message, else its text)."""
    try:
        body = response.json()
    except ValueError:
        return _short(response.text, 160) or response.reason_phrase
    if isinstance(body, Mapping):
        error = body.get("error", body)
        message = error.get("message") if isinstance(error, Mapping) else error
        detail = body.get("detail")
        return _short(message or detail or body, 160)
    return _short(body, 160)


class _Session:
    """One event loop's HTTP client: bounded concurrency, retries with backoff, one error for all."""

    def __init__(self, served: ServedModel, client: httpx.AsyncClient) -> None:
        self.served, self.client = served, client
        self.gate = asyncio.Semaphore(served.concurrency)

    def _headers(self) -> dict[str, str]:
        key = os.environ.get(self.served.api_key_env, "")
        return {"Authorization": f"Bearer {key}"} if key else {}

    async def request(self, method: str, path: str, payload: Mapping[str, Any] | None, *, what: str,
                      retries: int | None = None, adapter: bool = False) -> Any:
        import httpx

        served = self.served
        url = served.url + path
        budget = served.retries if retries is None else retries
        tries = 0
        while True:
            tries += 1
            async with self.gate:
                try:
                    response = await self.client.request(method, served.base_url + path, json=payload,
                                                         headers=self._headers())
                except httpx.ConnectError as exc:
                    if tries > budget:
                        raise EndpointError(
                            f"cannot reach {served.url} while {what} ({_short(exc, 80) or 'connection refused'}); "
                            "start the server, or check --base-url (and that the server is up: it answers "
                            "GET /v1/models when ready)") from None
                    failure = f"no connection ({_short(exc, 60)})"
                    wait = None
                except (httpx.TimeoutException, httpx.RemoteProtocolError, httpx.ReadError) as exc:
                    failure = f"{type(exc).__name__} after {served.timeout:g} s" if isinstance(
                        exc, httpx.TimeoutException) else f"a dropped connection ({type(exc).__name__})"
                    wait = None
                else:
                    if response.is_success:
                        if adapter:  # vLLM answers these in plain text ("Success: LoRA adapter ... added")
                            return response.text
                        try:
                            return response.json()
                        except ValueError:
                            raise EndpointError(f"{url} answered {what} with something that is not JSON "
                                                f"({_short(response.text, 80)!r})") from None
                    reason = _reason(response)
                    status = response.status_code
                    if any(mark in reason for mark in _DEAD):
                        raise EndpointError(
                            f"{served.url}: the server's engine died (HTTP {status}: {reason}) while {what}; every "
                            "later request fails the same way, so rlgate stops: restart the server (vLLM on CPU with "
                            "per-request seeds: start it with --no-enable-chunked-prefill, or lower --concurrency)")
                    if status in (401, 403):
                        have = "is set" if os.environ.get(served.api_key_env) else "is not set"
                        raise EndpointError(f"{url} refused the request (HTTP {status}: {reason}) while {what}; "
                                            f"the API key is read from ${served.api_key_env}, which {have}: set it, "
                                            "or name another variable with --api-key-env")
                    if status == 404 and adapter:
                        raise EndpointError(
                            f"{url}: HTTP 404 ({reason}) while {what}; start the server with --enable-lora and "
                            "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True to load adapters at run time")
                    if status not in _RETRIED:
                        overflow = status == 400 and any(mark in reason.lower() for mark in _OVERFLOW)
                        fix = ("lower --max-new-tokens, or serve the model with a longer context (vLLM: "
                               "--max-model-len)") if overflow else "fix the request named here, or the server"
                        error = EndpointError(f"{url} refused {what} (HTTP {status}: {reason}); {fix}")
                        if path == "/chat/completions":
                            raise _Refused(error, reason, overflow)
                        raise error
                    failure = f"HTTP {status} ({reason})"
                    wait = _retry_after(response)
            if tries > budget:
                raise EndpointError(
                    f"{url} failed {tries} times while {what}, last with {failure}; giving up after {budget} "
                    f"retries: lower --concurrency (now {served.concurrency}), or check the server's load and logs")
            delay = served.backoff * 2 ** (tries - 1) * (0.5 + random.random() / 2)
            await asyncio.sleep(min(MAX_WAIT, wait if wait is not None else delay))

    async def each(self, items: Sequence[T], call: Callable[[_Session, T], Awaitable[Any]]) -> list[Any]:
        """``call`` on every item at once (the semaphore bounds the flight), results in order;
        the first failure cancels the rest and is raised."""
        tasks = [asyncio.ensure_future(call(self, item)) for item in items]
        if not tasks:
            return []
        _done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        failures = [t.exception() for t in tasks if not t.cancelled() and t.exception() is not None]
        if failures:  # every failure retrieved (so none is reported as lost), the first raised
            raise failures[0]  # type: ignore[misc]
        return [task.result() for task in tasks]


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _run(served: ServedModel, work: Callable[[_Session], Awaitable[T]]) -> T:
    """Run *work* on a fresh HTTP client in its own event loop (a thread's, when the caller is
    inside a running loop already: a notebook, an async test)."""
    try:
        import httpx
    except ImportError:
        raise UsageError("sampling a served model needs httpx: pip install 'pytest-rlgate[served]'") from None

    async def main() -> T:
        limits = httpx.Limits(max_connections=served.concurrency, max_keepalive_connections=served.concurrency)
        async with httpx.AsyncClient(timeout=served.timeout, limits=limits) as client:
            return await work(_Session(served, client))

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, main()).result()


def warn_seed(served: ServedModel, verdict: str) -> None:
    """The warning a server that drops ``seed`` earns: its rows will not reproduce on a rerun."""
    if verdict == "ignored":
        warnings.warn(RlgateWarning(
            f"{served.url} ignores 'seed' (two requests with one seed got different replies): its rows will not "
            "reproduce on a rerun, and a resumed run mixes draws; the rows' header says so (sampler.served.seed)"),
            stacklevel=2)


def _local(root: object, identity: Callable[[str], T]) -> T | None:
    """*identity* of *root* when it is a folder on this machine (a server's own path for its weights)."""
    return identity(root) if isinstance(root, str) and Path(root).is_dir() else None


def served_identity(served: ServedModel, env: Env, items: Sequence[PromptItem], sampling: SampleOptions, *,
                    adapter: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """What a row header's ``sampler`` says of a model behind an endpoint: ``model`` and ``adapter``
    as for a loaded one, the engine ``served``, and ``served``: the server's own account
    (:meth:`ServedModel.identity`, without the URL, so replicas of one model write one header and
    their shards merge) and whether it honours ``seed`` (checked on the first prompt; a warning
    when it does not).

    Where the server's root for the weights is a folder on this machine, ``model`` (and an
    adapter's ``adapter``) is the content hash ``--model DIR`` rows carry
    (:mod:`~pytest_rlgate.policy.identity`), so a gate tells "the same weights on another engine"
    from "another model". *adapter* is the local folder an adapter was loaded from.
    """
    record = served.identity()
    record.pop("url", None)
    if items:
        text = prompt_text(items[0])
        record.update(served.seed_check(env.messages_for(text), sampling, prompt=text))
        warn_seed(served, record["seed"])
    parent = record.get("parent")
    model = _local(record["base"], base_identity) or {"served": parent if parent else record["id"]}
    if adapter is not None:
        adapter_id: object = adapter_identity(adapter)
    elif parent:
        adapter_id = _local(record.get("root"), adapter_identity) or {"served": record["id"]}
    else:
        adapter_id = None
    return {"model": model, "adapter": adapter_id, "backend": "served", "served": record}


def adapter_name(path: str | os.PathLike[str]) -> str:
    """The name an adapter folder is loaded into a server under: its content's, so one name is one set of weights."""
    return f"rlgate-{adapter_identity(path)[:16]}"
