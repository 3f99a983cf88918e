"""A small OpenAI-compatible server the served-sampler tests start: behaviours a real one shows.

It answers ``GET /v1/models``, ``POST /v1/chat/completions`` and vLLM's runtime LoRA endpoints.
A reply is a function of the request's seed, model and chat (so it honours ``seed`` like vLLM
does), written as one of the refund environment's moves so that rows grade to both passes and
fails. ``mode`` switches it to the faults the client must survive or report in one line:

``ok``, ``ignore_seed`` (a fresh random reply every request), ``storm`` (429 to everything),
``storm_then_ok`` (429 to the first ``flaky`` requests, then normal), ``flaky_500`` (a bare 500
to the first ``flaky`` requests), ``dead`` (500 ``EngineDeadError`` to everything), ``always_500``,
``overflow`` (400 context length to every chat), ``not_json``, ``no_choices``, ``drop_n``
(three choices to ``n=1``), ``tools`` (a ``tool_calls`` turn first, then text), ``tools_overflow`` (a
``tool_calls`` turn, then 400 context length: the chat outgrew the context).
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

BASE = "tiny-base"
ROOT = "/models/tiny-base"


@dataclass
class FakeServer:
    """What the server does, and what it saw (the test reads both)."""

    mode: str = "ok"
    flaky: int = 0
    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    adapters: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: HTTP Authorization headers seen (the key must reach the server, and only the server)
    auth: list[str | None] = field(default_factory=list)
    root: str = ROOT

    def models(self) -> dict[str, Any]:
        data = [{"id": BASE, "object": "model", "root": self.root, "parent": None, "max_model_len": 1024,
                 "owned_by": "fake", "created": random.randint(0, 10**9)}]
        data += [{"id": name, "object": "model", "root": path, "parent": BASE, "max_model_len": 1024}
                 for name, path in self.adapters.items()]
        return {"object": "list", "data": data}


def reply_for(seed: int, model: str, messages: list[dict[str, Any]]) -> str:
    """A refund move chosen by the request: lookup, refund of an order id in the prompt, or a question."""
    user = next((m["content"] for m in messages if m.get("role") == "user"), "")
    digest = hashlib.sha256(json.dumps([seed, model, messages], sort_keys=True).encode()).digest()
    words = [w.strip(".,!?") for w in str(user).split()]
    order = next((w for w in words if w[:4] in ("ORD-", "A-12")), None)
    pick = digest[0] % 3
    if order and pick == 0:
        return f'<tool_call>\n{{"name": "lookup_order", "arguments": {{"order_id": "{order}"}}}}\n</tool_call>'
    if order and pick == 1:
        return f'<tool_call>\n{{"name": "issue_refund", "arguments": {{"order_id": "{order}"}}}}\n</tool_call>'
    return f"Could you tell me your order number? ({digest[1]})"


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *_args: object) -> None:  # quiet
        pass

    def _send(self, status: int, body: object, *, raw: bytes | None = None, headers: dict[str, str] | None = None,
              ) -> None:
        data = raw if raw is not None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        fake = self.server.fake
        if self.path.rstrip("/") == "/v1/models":
            self._send(200, fake.models())
        else:
            self._send(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        fake = self.server.fake
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        with fake.lock:
            fake.requests.append(body)
            fake.auth.append(self.headers.get("authorization"))
            count = len(fake.requests)
        if self.path == "/v1/load_lora_adapter":
            if body["lora_name"] in fake.adapters:
                self._send(400, {"error": {"message": f"The lora adapter '{body['lora_name']}' has already been "
                                                      "loaded."}})
                return
            fake.adapters[body["lora_name"]] = body["lora_path"]
            self._send(200, {}, raw=f"Success: LoRA adapter '{body['lora_name']}' added successfully.".encode())
            return
        if self.path == "/v1/unload_lora_adapter":
            fake.adapters.pop(body["lora_name"], None)
            self._send(200, {}, raw=f"Success: LoRA adapter '{body['lora_name']}' removed successfully.".encode())
            return
        if self.path != "/v1/chat/completions":
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        mode = fake.mode
        if mode == "storm" or (mode == "storm_then_ok" and count <= fake.flaky):
            self._send(429, {"error": {"message": "rate limited"}}, headers={"retry-after": "0"})
            return
        if mode == "flaky_500" and count <= fake.flaky:
            self._send(500, {"error": {"message": "Internal Server Error"}})
            return
        if mode == "dead":
            self._send(500, {"error": {"message": "EngineCore encountered an issue. See stack trace (above) for the "
                                                  "root cause.", "type": "EngineDeadError"}})
            return
        if mode == "always_500":
            self._send(500, {"error": {"message": "Internal Server Error"}})
            return
        later = any(m.get("role") == "tool" for m in body.get("messages", ()))
        if mode == "overflow" or (mode == "tools_overflow" and later):
            self._send(400, {"error": {"message": "This model's maximum context length is 1024 tokens. However, you "
                                                  "requested 1184 tokens (1024 in the messages, 160 in the "
                                                  "completion).", "type": "BadRequestError"}})
            return
        if mode == "not_json":
            self._send(200, None, raw=b"<html>502 Bad Gateway</html>")
            return
        if mode == "no_choices":
            self._send(200, {"id": "x", "object": "chat.completion"})
            return
        model = body.get("model")
        if model != BASE and model not in fake.adapters:
            self._send(404, {"error": {"message": f"The model `{model}` does not exist."}})
            return
        seed = random.randint(0, 2**62) if mode == "ignore_seed" else body.get("seed")
        messages = body["messages"]
        text = reply_for(seed, model, messages)
        if mode == "ignore_seed":  # every draw its own text, as a sampler without a seed gives
            text = f"{text} (draw {seed})"
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if mode in ("tools", "tools_overflow") and body.get("tools") and not later:
            user = next(m["content"] for m in messages if m["role"] == "user")
            order = next((w.strip(".,!?") for w in user.split() if w.startswith("ORD-")), "ORD-000000")
            message = {"role": "assistant", "content": None, "tool_calls": [{
                "id": "call_x", "type": "function",
                "function": {"name": "lookup_order", "arguments": json.dumps({"order_id": order})}}]}
        elif mode == "tools":
            message = {"role": "assistant", "content": f"Done ({seed % 7}).", "tool_calls": []}
        choices = [{"index": 0, "message": message, "finish_reason": "stop"}]
        if mode == "drop_n":
            choices = choices * 3
        self._send(200, {"id": f"chatcmpl-{count}", "object": "chat.completion", "model": model, "choices": choices,
                         "system_fingerprint": "fake-1.0"})


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that cancelled its request (the faults' point) is no error of the server's

    def __init__(self, fake: FakeServer) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.fake = fake


@contextmanager
def fake_server(mode: str = "ok", **settings: Any) -> Iterator[FakeServer]:
    """A running fake server on a free local port; ``fake.url`` is its ``/v1`` address."""
    fake = FakeServer(mode=mode, **settings)
    server = _Server(fake)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
