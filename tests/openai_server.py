"""A scripted OpenAI-compatible server on loopback, for tests that use the real client.

The server speaks ``POST /v1/chat/completions`` in OpenAI's response shape, records
every request, and answers from a per-test script::

    def test_something(openai_server, openai_summarizer_settings):
        openai_server.reply("the summary", prompt_tokens=120, completion_tokens=8)
        openai_server.reply("the summary", prompt_tokens=2048, cached_tokens=1920)
        openai_server.fail(500)
        openai_server.delay(5)          # longer than TIMEOUT: the client times out
        with override_settings(AGENTMEMORY=openai_summarizer_settings):
            ...
        assert len(openai_server.requests) == 3

A request arriving with the script empty gets :data:`DEFAULT_REPLY`. The server binds
``127.0.0.1`` on an ephemeral port, so any local process can reach ``base_url``: give
a Celery worker :func:`summarizer_settings` ``(server.base_url)`` and the key in
:data:`TEST_API_KEY` (env ``OPENAI_API_KEY``); the test process scripts the replies and
reads ``requests`` (use :meth:`OpenAIServer.wait_for_requests` to wait for the worker).
"""

from __future__ import annotations

import collections
import http.server
import itertools
import json
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

#: The key the fixtures put in ``OPENAI_API_KEY``. Tests assert it is sent and never logged.
TEST_API_KEY = "sk-agentmemory-test-7f3a9c1e5b2d4f60"

#: The model the test settings name.
TEST_MODEL = "gpt-test-mini"

#: What the server answers when the script is empty: short, so a fold is always smaller.
DEFAULT_REPLY = "The user asked about the order; the agent looked it up and confirmed it."

CHAT_PATH = "/v1/chat/completions"

_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", None),
    404: ("invalid_request_error", None),
    409: ("invalid_request_error", None),
    422: ("invalid_request_error", None),
    429: ("requests", "rate_limit_exceeded"),
}


def rough_tokens(text: str) -> int:
    """About four characters a token, like a provider's estimate; at least 1."""
    return max(1, math.ceil(len(text) / 4))


@dataclass(frozen=True)
class Reply:
    """A chat completion. Token counts left as None are counted roughly from the request.

    ``tool_calls`` (``{"id", "name", "arguments"}`` each) make it a tool-calling reply:
    null content, the calls in OpenAI's nested form, finish reason ``tool_calls``.
    ``cached_tokens`` adds ``usage.prompt_tokens_details.cached_tokens`` (the prompt
    tokens a provider read from its prompt cache); left as None, the usage has no details,
    as from a server that does not report them.
    """

    content: str = DEFAULT_REPLY
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str = "stop"
    tool_calls: tuple[dict[str, str], ...] = ()
    cached_tokens: int | None = None


@dataclass(frozen=True)
class Failure:
    """An HTTP error with an OpenAI-style ``{"error": {...}}`` body."""

    status: int
    message: str = ""
    error_type: str | None = None
    code: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        default_type, default_code = _ERROR_TYPES.get(self.status, ("server_error", None))
        message = self.message or f"Scripted test failure with status {self.status}."
        return {
            "error": {
                "message": message,
                "type": self.error_type or default_type,
                "param": None,
                "code": self.code if self.code is not None else default_code,
            }
        }


@dataclass(frozen=True)
class Delay:
    """Wait ``seconds`` (or until the server stops), then answer with ``then``."""

    seconds: float
    then: Reply | Failure = field(default_factory=Reply)


@dataclass(frozen=True)
class Respond:
    """A reply computed from the request body: a scripted model that reads what it was
    sent (``answer(body) -> Reply``), e.g. one that calls a tool with what an earlier
    tool result told it."""

    answer: Callable[[Any], Reply]


@dataclass(frozen=True)
class Raw:
    """An answer with exactly this status, body and content type: a proxy's page, an
    empty body, JSON that is no chat completion."""

    body: bytes
    status: int = 200
    content_type: str = "application/json"


Scripted = Reply | Failure | Delay | Respond | Raw


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: Any  # the parsed JSON body, or None when it was not JSON
    raw: bytes

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", [])) if isinstance(self.body, dict) else []


class OpenAIServer:
    """A ThreadingHTTPServer on 127.0.0.1:0 in a daemon thread. Use as a context manager."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._script: collections.deque[Scripted] = collections.deque()
        self._requests: list[RecordedRequest] = []
        self._stopping = threading.Event()
        self._ids = itertools.count(1)
        self._httpd = _HTTPServer((host, 0), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="openai-test-server",
            daemon=True,
        )

    # ------------------------------------------------------------ lifecycle

    def start(self) -> OpenAIServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, wake any delayed handler and close the socket; never blocks long."""
        self._stopping.set()
        if self._thread.is_alive():
            self._httpd.shutdown()
            self._thread.join(timeout=5)
        self._httpd.server_close()

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """What OpenAI's client takes as ``base_url``: ``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    # ------------------------------------------------------------ scripting

    def script(self, *replies: Scripted) -> OpenAIServer:
        """Queue replies, answered in order, one per chat completion request."""
        with self._lock:
            self._script.extend(replies)
        return self

    def reply(
        self,
        content: str = DEFAULT_REPLY,
        *,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
        finish_reason: str = "stop",
        cached_tokens: int | None = None,
    ) -> OpenAIServer:
        return self.script(Reply(content, prompt_tokens, completion_tokens, finish_reason,
                                 cached_tokens=cached_tokens))

    def fail(
        self,
        status: int,
        message: str = "",
        *,
        error_type: str | None = None,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> OpenAIServer:
        return self.script(Failure(status, message, error_type, code, dict(headers or {})))

    def delay(self, seconds: float, then: Reply | Failure | None = None) -> OpenAIServer:
        return self.script(Delay(seconds, then or Reply()))

    def reset(self) -> None:
        """Forget the script and the recorded requests."""
        with self._lock:
            self._script.clear()
            self._requests.clear()

    @property
    def pending(self) -> int:
        """Scripted replies not yet consumed."""
        with self._lock:
            return len(self._script)

    # ------------------------------------------------------------ recorded requests

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [request for request in self.requests if request.path == CHAT_PATH]

    def wait_for_requests(self, count: int, timeout: float = 10.0) -> list[RecordedRequest]:
        """Block until ``count`` requests arrived (e.g. from a worker process), or fail."""
        deadline = time.monotonic() + timeout
        with self._arrived:
            while len(self._requests) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(
                        f"expected {count} requests at {self.base_url} within {timeout}s, "
                        f"got {len(self._requests)}"
                    )
                self._arrived.wait(remaining)
            return list(self._requests)

    # ------------------------------------------------------------ handler side

    def _record(self, request: RecordedRequest) -> Scripted | None:
        """Store the request and take the next scripted reply for a chat completion."""
        with self._arrived:
            self._requests.append(request)
            self._arrived.notify_all()
            if request.path != CHAT_PATH or request.method != "POST":
                return None
            return self._script.popleft() if self._script else Reply()

    def _wait(self, seconds: float) -> None:
        self._stopping.wait(seconds)

    def _completion(self, reply: Reply, body: Any) -> dict[str, Any]:
        messages = body.get("messages", []) if isinstance(body, dict) else []
        prompt_text = "".join(str(message.get("content", "")) for message in messages)
        prompt_tokens = (
            reply.prompt_tokens if reply.prompt_tokens is not None else rough_tokens(prompt_text)
        )
        completion_tokens = (
            reply.completion_tokens
            if reply.completion_tokens is not None
            else rough_tokens(reply.content)
        )
        return {
            "id": f"chatcmpl-test{next(self._ids):06d}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", TEST_MODEL) if isinstance(body, dict) else TEST_MODEL,
            "system_fingerprint": "fp_agentmemory_test",
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": None if reply.tool_calls else reply.content,
                        "refusal": None,
                        "annotations": [],
                        **({"tool_calls": [
                            {"id": call["id"], "type": "function",
                             "function": {"name": call["name"], "arguments": call["arguments"]}}
                            for call in reply.tool_calls
                        ]} if reply.tool_calls else {}),
                    },
                    "logprobs": None,
                    "finish_reason": "tool_calls" if reply.tool_calls else reply.finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                **({"prompt_tokens_details": {"cached_tokens": reply.cached_tokens}}
                   if reply.cached_tokens is not None else {}),
            },
        }


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 64  # a worker pool may connect at once
    owner: OpenAIServer


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.1"
    timeout = 10  # a client that opens a connection and sends nothing cannot pin a thread

    def do_POST(self) -> None:
        self._handle()

    def do_GET(self) -> None:
        self._handle()

    def _handle(self) -> None:
        owner = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        scripted = owner._record(
            RecordedRequest(
                method=self.command,
                path=self.path.split("?", 1)[0],
                headers={name.lower(): value for name, value in self.headers.items()},
                body=body,
                raw=raw,
            )
        )
        if scripted is None:
            self._send_json(404, Failure(404, f"No route for {self.command} {self.path}.").body())
            return
        if isinstance(scripted, Delay):
            owner._wait(scripted.seconds)
            scripted = scripted.then
        if isinstance(scripted, Respond):
            scripted = scripted.answer(body)
        if isinstance(scripted, Raw):
            self._send(scripted.status, scripted.body, scripted.content_type)
        elif isinstance(scripted, Failure):
            self._send_json(scripted.status, scripted.body(), scripted.headers)
        else:
            self._send_json(200, owner._completion(scripted, body))

    def _send_json(
        self, status: int, payload: dict[str, Any], headers: Mapping[str, str] | None = None
    ) -> None:
        self._send(status, json.dumps(payload).encode(), "application/json", headers)

    def _send(
        self, status: int, data: bytes, content_type: str,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.send_header("x-request-id", f"req_test_{status}")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass  # the client gave up (a timeout test): nobody is left to answer
        self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: request lines would clutter test output (and headers are never logged)."""


def summarizer_settings(
    base_url: str, *, timeout: float = 5.0, model: str = TEST_MODEL, **options: Any
) -> dict[str, Any]:
    """An ``AGENTMEMORY`` dict whose summarizer is the OpenAI backend aimed at ``base_url``."""
    return {
        "SUMMARIZER": {
            "BACKEND": "agentmemory.summarizers.openai.OpenAISummarizer",
            "MODEL": model,
            "OPTIONS": {"BASE_URL": base_url, "TIMEOUT": timeout, **options},
        }
    }


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    """A fresh scripted server per test, stopped (with any delayed reply cut short) after."""
    with OpenAIServer() as server:
        yield server


@pytest.fixture
def openai_summarizer_settings(
    openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """``AGENTMEMORY`` for the OpenAI backend on ``openai_server``; sets ``OPENAI_API_KEY``."""
    monkeypatch.setenv("OPENAI_API_KEY", TEST_API_KEY)
    return summarizer_settings(openai_server.base_url)
