"""Optional embeddings through any OpenAI-compatible ``/embeddings`` endpoint.

Used only when ``knowledge.embeddings_model`` is set (with ``llm.base_url``); retrieval works
without it. Vectors are stored with the unit so each unit is embedded once per model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

from bot.errors import KnowledgeError
from bot.redact import global_redactor

BATCH = 64


class OpenAIEmbedder:
    def __init__(self, base_url: str, model: str, api_key: str = "", timeout: float = 30.0) -> None:
        self.url = base_url.rstrip("/") + "/embeddings"
        self.model = model
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.timeout = timeout

    @classmethod
    def from_settings(cls, settings: Any) -> OpenAIEmbedder | None:
        k, llm = settings.knowledge, settings.llm
        if not (k.embeddings_model and llm.base_url):
            return None
        return cls(llm.base_url, k.embeddings_model, llm.api_key, float(llm.timeout))

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), BATCH):
            chunk = [t[:8000] for t in texts[start : start + BATCH]]
            try:
                r = httpx.post(
                    self.url, json={"model": self.model, "input": chunk}, headers=self._headers, timeout=self.timeout
                )
                r.raise_for_status()
                data = sorted(r.json()["data"], key=lambda d: d.get("index", 0))
                vectors = [[float(x) for x in d["embedding"]] for d in data]
            except (httpx.HTTPError, KeyError, TypeError, ValueError) as exc:
                raise KnowledgeError(
                    global_redactor()(f"embeddings request to {self.url} failed: {exc}"),
                    "Check llm.base_url and knowledge.embeddings_model, or unset the model.",
                ) from exc
            if len(vectors) != len(chunk):
                raise KnowledgeError(f"embeddings endpoint returned {len(vectors)} vectors for {len(chunk)} inputs")
            out.extend(vectors)
        return out
