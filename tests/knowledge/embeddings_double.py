"""A local OpenAI-compatible /embeddings endpoint for tests.

Vectors are hashed bags of words (deterministic, 128 dimensions), so texts sharing words are
close; ``fail`` makes every request answer 500 to exercise the fallback.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIM = 128


def embed_text(text: str) -> list[float]:
    vec = [0.0] * DIM
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        h = int(hashlib.sha256(word.encode()).hexdigest(), 16)
        vec[h % DIM] += 1.0 if (h >> 8) % 2 else -1.0
    return vec


class EmbeddingsDouble:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.requests = 0
        self.bodies: list[dict] = []

    def __enter__(self) -> EmbeddingsDouble:
        double = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                double.requests += 1
                double.bodies.append(body)
                if double.fail or self.path.rstrip("/") != "/v1/embeddings":
                    payload, status = b'{"error": {"message": "unavailable"}}', 500 if double.fail else 404
                else:
                    inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
                    payload = json.dumps(
                        {
                            "object": "list",
                            "model": body.get("model"),
                            "data": [
                                {"object": "embedding", "index": i, "embedding": embed_text(t)}
                                for i, t in enumerate(inputs)
                            ],
                        }
                    ).encode()
                    status = 200
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
