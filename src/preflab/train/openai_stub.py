"""A small OpenAI-compatible HTTP server with a scripted policy: the endpoint of the sampling
tests, the sampling benchmark and the README's walk-through.

It speaks the wire format vLLM, SGLang, TGI, Ollama and llama.cpp servers speak for
``POST /v1/chat/completions`` (and ``POST /v1/completions``, ``GET /v1/models``): a JSON body
with ``model``, ``messages`` (or ``prompt``), ``temperature``, ``top_p``, ``max_tokens``,
``seed``, ``n``; an answer with ``choices[].message.content`` (or ``choices[].text``),
``finish_reason`` and ``usage`` (``prompt_tokens``, ``completion_tokens``, ``total_tokens``).

The "policy" is a table ``{prompt text: [answer, ...]}``: a request with seed ``s`` gets answer
``s mod len(answers)`` (no seed: the first), so a test knows exactly which samples pass; or a
``responder(prompt, attempt)`` function (the judge tests' scripted judges: ``attempt`` is 1 for
the first request of that prompt, 2 for the second ...). Faults
can be injected: the first ``fail_first`` requests of each prompt answer ``fail_status`` (429 by
default, with ``Retry-After: 0``), and ``delay_s`` delays every answer (a slow server, or a
client timeout when it exceeds the client's).

Run it standalone (the README's demo)::

    python -m preflab.train.openai_stub --answers answers.json --port 8011
"""

from __future__ import annotations

import argparse
import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_ANSWER = "I do not know."


def prompt_text(body: Mapping[str, Any]) -> str:
    """The text a request asks about: the last user message (chat) or the prompt (completions)."""
    messages = body.get("messages")
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") == "user":
                content = message.get("content")
                return content if isinstance(content, str) else json.dumps(content)
        return ""
    prompt = body.get("prompt")
    return prompt if isinstance(prompt, str) else json.dumps(prompt)


class StubPolicy:
    """What the server answers, and what it has seen (thread-safe counters for the tests)."""

    def __init__(
        self,
        answers: Mapping[str, Sequence[str]] | None = None,
        *,
        default: str = DEFAULT_ANSWER,
        fail_first: int = 0,
        fail_status: int = 429,
        delay_s: float = 0.0,
        responder: Callable[[str, int], str] | None = None,
    ) -> None:
        self.responder = responder
        self.answers = {k: list(v) for k, v in (answers or {}).items()}
        self.default = default
        self.fail_first = fail_first
        self.fail_status = fail_status
        self.delay_s = delay_s
        self.lock = threading.Lock()
        self.requests = 0  # every POST that reached a completion route
        self.failures = 0  # of which answered with an injected fault
        self.seen: Counter[str] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0  # the most requests answered at once (a concurrency check)

    def answer(self, prompt: str, seed: int | None) -> str:
        if self.responder is not None:
            with self.lock:
                attempt = self.seen[prompt] - min(self.seen[prompt], self.fail_first)
            return self.responder(prompt, attempt)
        options = self.answers.get(prompt) or [self.default]
        return options[(seed or 0) % len(options)]

    def admit(self, prompt: str) -> bool:
        """Count the request; False when this one is to fail."""
        with self.lock:
            self.requests += 1
            self.seen[prompt] += 1
            if self.seen[prompt] <= self.fail_first:
                self.failures += 1
                return False
            return True


def _tokens(text: str) -> int:
    return len(text.split())


def _handler(policy: StubPolicy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            # headers and body go out in two writes: without this, Nagle's algorithm and the
            # client's delayed ACK hold the body back ~40 ms on every keep-alive request
            self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, format: str, *args: Any) -> None:
            return

        def _send(self, status: int, payload: Any, headers: Mapping[str, str] = {}) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": "stub", "object": "model"}]})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            chat = self.path.rstrip("/") == "/v1/chat/completions"
            if not chat and self.path.rstrip("/") != "/v1/completions":
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            try:
                body = json.loads(raw)
                if not isinstance(body, dict) or "model" not in body:
                    raise ValueError("a JSON object with 'model' is required")
            except ValueError as e:
                self._send(400, {"error": {"message": str(e), "type": "invalid_request_error"}})
                return
            prompt = prompt_text(body)
            if not policy.admit(prompt):
                self._send(
                    policy.fail_status,
                    {"error": {"message": "injected fault", "type": "server_error"}},
                    {"Retry-After": "0"},
                )
                return
            with policy.lock:
                policy.in_flight += 1
                policy.max_in_flight = max(policy.max_in_flight, policy.in_flight)
            try:
                if policy.delay_s:
                    time.sleep(policy.delay_s)
            finally:
                with policy.lock:
                    policy.in_flight -= 1
            seed = body.get("seed")
            n = int(body.get("n") or 1)
            max_tokens = body.get("max_tokens")
            choices, completion_tokens = [], 0
            for i in range(n):
                text = policy.answer(prompt, None if seed is None else int(seed) + i)
                finish = "stop"
                if isinstance(max_tokens, int) and _tokens(text) > max_tokens:
                    text, finish = " ".join(text.split()[:max_tokens]), "length"
                completion_tokens += _tokens(text)
                choice: dict[str, Any] = {"index": i, "finish_reason": finish}
                if chat:
                    choice["message"] = {"role": "assistant", "content": text}
                else:
                    choice["text"] = text
                choices.append(choice)
            prompt_tokens = _tokens(prompt)
            self._send(
                200,
                {
                    "id": f"stub-{policy.requests}",
                    "object": "chat.completion" if chat else "text_completion",
                    "created": int(time.time()),
                    "model": body["model"],
                    "choices": choices,
                    "usage": {
                        "prompt_tokens": prompt_tokens,
                        "completion_tokens": completion_tokens,
                        "total_tokens": prompt_tokens + completion_tokens,
                    },
                },
            )

    return Handler


class StubServer:
    """The server on a background thread: ``with StubServer(policy) as server: server.url``."""

    def __init__(self, policy: StubPolicy, host: str = "127.0.0.1", port: int = 0) -> None:
        self.policy = policy
        self.httpd = ThreadingHTTPServer((host, port), _handler(policy))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def __enter__(self) -> StubServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--answers", help="JSON file {prompt: [answer, ...]}")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8011)
    args = parser.parse_args(argv)
    answers = {}
    if args.answers:
        with open(args.answers, encoding="utf-8") as f:
            answers = json.load(f)
    server = StubServer(StubPolicy(answers), args.host, args.port)
    print(f"serving {len(answers)} prompts at {server.url}", flush=True)
    try:
        server.httpd.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":  # pragma: no cover
    main()
