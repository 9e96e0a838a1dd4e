"""A local OpenAI-compatible HTTP server with scripted replies, for tests.

It answers ``POST /v1/chat/completions`` (and ``/chat/completions``) with the next scripted reply
and records every request body, so tests can assert what the bot sent (no secrets, fenced
repository text) as well as how it handled what came back.

A scripted reply is either a string (the assistant message content) or a dict:
  {"status": 429, "headers": {"retry-after": "0"}, "body": {...}}   an error response
  {"content": "...", "usage": {"total_tokens": 123}}                 a normal reply
  {"delay": 2.0, ...}                                                answer after a delay
When the script runs out, the server answers with a ``finish`` action.

    with ScriptedLLMServer(['{"action": "finish"}']) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="x")
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FINISH = '{"action": "finish", "why": "script exhausted"}'


class ScriptedLLMServer:
    def __init__(self, replies: Iterable[Any] = (), model: str = "scripted-model") -> None:
        self.replies = list(replies)
        self.model = model
        self.requests: list[dict[str, Any]] = []  # parsed JSON bodies
        self.raw_requests: list[bytes] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> ScriptedLLMServer:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": outer.model, "object": "model"}]})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                with outer._lock:
                    outer.raw_requests.append(raw)
                    outer.headers.append({k.lower(): v for k, v in self.headers.items()})
                    try:
                        outer.requests.append(json.loads(raw or b"{}"))
                    except json.JSONDecodeError:
                        outer.requests.append({"_invalid": raw.decode("utf-8", "replace")})
                    reply = outer.replies.pop(0) if outer.replies else FINISH
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                if isinstance(reply, dict) and reply.get("delay"):
                    time.sleep(float(reply["delay"]))
                if isinstance(reply, dict) and reply.get("status", 200) != 200:
                    body = reply.get("body") or {
                        "error": {"message": f"scripted {reply['status']}", "type": "scripted_error"}
                    }
                    self._send(int(reply["status"]), body, reply.get("headers") or {})
                    return
                content = reply if isinstance(reply, str) else reply.get("content", FINISH)
                usage = (reply.get("usage") if isinstance(reply, dict) else None) or {
                    "prompt_tokens": len(raw) // 4,
                    "completion_tokens": len(content) // 4,
                    "total_tokens": len(raw) // 4 + len(content) // 4,
                }
                self._send(
                    200,
                    {
                        "id": f"chatcmpl-{len(outer.requests)}",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": outer.model,
                        "choices": [
                            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}
                        ],
                        "usage": usage,
                    },
                )

            def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    # -- what tests look at ------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        assert self._server is not None, "start the server first"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def all_request_text(self) -> str:
        return b"\n".join(self.raw_requests).decode("utf-8", "replace")

    def push(self, *replies: Any) -> None:
        with self._lock:
            self.replies.extend(replies)
