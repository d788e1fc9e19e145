"""The reference memory layer ``bm25``: top-k lexical retrieval over the ingested entries.

Built on the maintained library ``bm25s`` (Lucene's BM25 variant). Text is
tokenised simply: lowercase runs of letters and digits (``fetch_json`` and
``requests.get`` split into their words) of two characters or more, without
bm25s's English stopwords, with the commonest English suffixes taken off
(``fetches``, ``fetching`` and ``fetched`` all count as ``fetch``). A query answers
``{"context": "- text\\n- text", "entries": [ids], "name": "bm25", "version": ...}``
with the ``k`` best entries that share a word with the task, best first (ties
in ingest order); none is an empty context, not a failure.

Two ways to run it, one handler:

* built in (``memory`` arm default): the index lives in the layer's ``memory``
  dict, built once at ingest; a query costs a tokenisation and a sparse score.
* as a command, ``python -m cvb_engine.memory_layers.bm25``: the request on
  stdin, the reply on stdout; ingest stores the entries as JSON under
  ``state_dir`` and each query rebuilds the index from them (a process costs
  the import of numpy and bm25s, about half a second).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from cvb_engine.memory_layers.builtin import register_layer
from cvb_engine.memory_layers.protocol import PROTOCOL

NAME = "bm25"
#: Our side of the version: bump when tokenising, ranking or the reply's shape changes.
LAYER_REVISION = "cvb.1"
_WORD = re.compile(r"[^\W_]{2,}")


@functools.cache
def version() -> str:
    """The layer's version: bm25s's, plus our revision (``0.3.16+cvb.1``)."""
    return f"{metadata.version('bm25s')}+{LAYER_REVISION}"


@functools.cache
def _stopwords() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN  # type: ignore[import-untyped]

    return frozenset(STOPWORDS_EN)


def stem(word: str) -> str:
    """``word`` without a plural or -ing/-ed ending, nor a final e: a few rules, not
    Porter's algorithm (``parse``, ``parses`` and ``parsed`` are all ``pars``).

    Task and memory go through the same rules, so a stem need not be a word.
    """
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    if word.endswith("es") and word[:-2].endswith(("s", "x", "ch", "sh")) and len(word) > 4:
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 3:
        word = word[:-1]
    if word.endswith("e") and len(word) > 3:
        return word[:-1]
    return word


def tokens(text: str) -> list[str]:
    """The words of ``text`` that count for retrieval, stemmed."""
    stop = _stopwords()
    return [stem(w) for w in _WORD.findall(text.lower()) if w not in stop]


class Index:
    """The BM25 index of one namespace's entries: ``(id, text)`` pairs, in ingest order."""

    def __init__(self, entries: list[tuple[str, str]]) -> None:
        import bm25s  # type: ignore[import-untyped]

        self.entries = entries
        self._retriever: bm25s.BM25 | None = None
        if entries:
            self._retriever = bm25s.BM25()
            self._retriever.index([tokens(text) for _, text in entries], show_progress=False)

    def top(self, task: str, k: int) -> list[int]:
        """Indexes of the ``k`` best entries for ``task`` with a positive score, best first."""
        import numpy as np

        if self._retriever is None:
            return []
        vocabulary = self._retriever.vocab_dict
        query = [w for w in tokens(task) if w in vocabulary]
        if not query:
            return []
        scores = self._retriever.get_scores(query)
        order = np.argsort(-scores, kind="stable")[:k]
        return [int(i) for i in order if scores[i] > 0]


@register_layer(NAME, "top-k lexical retrieval (BM25, the bm25s library) over the ingested entries")
def handle(
    request: dict[str, Any], state_dir: Path | None, memory: dict[str, Any]
) -> dict[str, Any]:
    """Answer one ``cvb-memory/1`` request.

    With ``state_dir`` None (built in) the index is kept in ``memory``; otherwise
    the entries are kept as a JSON file under ``state_dir``. A request that is
    not one raises ``ValueError``; ingest replaces what the namespace held.
    """
    if request.get("protocol") != PROTOCOL:
        raise ValueError(f"expected protocol {PROTOCOL!r}, got {request.get('protocol')!r}")
    namespace = request.get("namespace")
    if not isinstance(namespace, str):
        raise ValueError("namespace: expected a string")
    op = request.get("op")
    if op == "ingest":
        entries = _entries(request.get("entries"))
        if state_dir is None:
            memory[namespace] = Index(entries)
        else:
            _save(state_dir, namespace, entries)
        return {"ok": True, "name": NAME, "version": version()}
    if op == "query":
        task, k = request.get("task"), request.get("k")
        if not isinstance(task, str):
            raise ValueError("task: expected a string")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError("k: expected a whole number of at least 1")
        index = memory.get(namespace) if state_dir is None else _load(state_dir, namespace)
        if index is None:
            raise ValueError(f"nothing was ingested under namespace {namespace!r}")
        hits = [index.entries[i] for i in index.top(task, k)]
        return {
            "context": "\n".join(f"- {' '.join(text.split())}" for _, text in hits),
            "entries": [entry_id for entry_id, _ in hits],
            "name": NAME,
            "version": version(),
        }
    raise ValueError(f"op: expected 'ingest' or 'query', got {op!r}")


def _entries(value: object) -> list[tuple[str, str]]:
    if not isinstance(value, list):
        raise ValueError("entries: expected a list")
    out = []
    for i, entry in enumerate(value):
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("id"), str)
            and isinstance(entry.get("text"), str)
        ):
            raise ValueError(f"entries[{i}]: expected an object with string id and text")
        out.append((entry["id"], entry["text"]))
    return out


def _state_file(state_dir: Path, namespace: str) -> Path:
    # The namespace is opaque: hashed, it is always a safe file name.
    digest = hashlib.sha256(namespace.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return state_dir / f"bm25-{digest}.json"


def _save(state_dir: Path, namespace: str, entries: list[tuple[str, str]]) -> None:
    path = _state_file(state_dir, namespace)
    state_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    data = {"protocol": PROTOCOL, "namespace": namespace, "entries": entries}
    tmp.write_text(json.dumps(data), encoding="utf-8")
    tmp.replace(path)  # a query running meanwhile reads the old entries or the new, whole


def _load(state_dir: Path, namespace: str) -> Index | None:
    path = _state_file(state_dir, namespace)
    if not path.exists():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return Index([(str(i), str(t)) for i, t in data["entries"]])


def main() -> int:
    """The command form: one request on stdin, its reply on stdout."""
    try:
        request = json.loads(sys.stdin.buffer.read())
        if not isinstance(request, dict):
            raise ValueError("expected a JSON object on stdin")
        state_dir = request.get("state_dir")
        if not isinstance(state_dir, str) or not state_dir:
            raise ValueError("state_dir: expected a directory (cvb's command transport sends one)")
        # Whatever a library prints must not mix with the reply.
        with contextlib.redirect_stdout(sys.stderr):
            reply = handle(request, Path(state_dir), {})
    except Exception as exc:
        print(f"bm25 memory layer: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(json.dumps(reply) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
