"""Policy corpora for the Regulatory metric: connectors and chunking (spec §6.8, §9).

* :class:`RegulatoryDocument` — one policy text and where it came from (``source``).
* :class:`CorpusConnector` — the interface (``load_documents() -> list[RegulatoryDocument]``).
* :class:`LocalCorpusConnector` — a folder of ``.md`` / ``.txt`` files, or a single file, read as
  UTF-8 **in sorted file-name order** (upstream reads in filesystem order, spec §17 item 28).
* :func:`packaged_corpus` — the corpora shipped with the package (``"airline"``: the τ-bench
  airline agent policy, MIT; ``"callcenter"``: a small call-centre policy written for this
  project), see ``fair_forge_beam/data/regulatory/NOTICE.md``.
* :class:`ChunkerConfig` / :func:`chunk_document` — splitting into chunks of at most
  ``chunk_size`` characters that overlap by at most ``chunk_overlap`` characters, with the
  ``semantic-text-splitter`` library (Rust; splits at the largest semantic unit that fits:
  Markdown sections, paragraphs, sentences, words). ``chunk_overlap >= chunk_size`` is rejected
  with ``ValueError`` when the config is built (upstream's own window loop never ends then,
  spec §17 item 20).

Why not ``apache_beam.ml.rag.chunking``: Beam 2.77's ``LangChainChunker`` imports
``langchain.text_splitter`` (the full ``langchain`` package and its dependency tree), runs inside
``MLTransform`` and gives chunks random UUIDs unless an id function is passed; a chunk here needs
a stable ``(source, chunk_index)`` identity for reproducible retrieval ties and cache keys.
"""
from __future__ import annotations

import importlib.resources
import logging
import os
import re
from abc import ABC, abstractmethod
from pathlib import Path
from typing import NamedTuple, Sequence, Union

from fair_forge_beam.blank import is_blank
from fair_forge_beam.io.edge import read_side_text
from fair_forge_beam.plain import plain_reason
from fair_forge_beam.quoting import quoted
from fair_forge_beam.arguments import checks_arguments

__all__ = [
    "RegulatoryDocument",
    "CorpusChunk",
    "CorpusConnector",
    "LocalCorpusConnector",
    "ListCorpusConnector",
    "ChunkerConfig",
    "chunk_document",
    "packaged_corpus",
    "PACKAGED_CORPORA",
    "CORPUS_SUFFIXES",
]

_LOG = logging.getLogger(__name__)

#: file suffixes a local corpus folder is read for (case-insensitive)
CORPUS_SUFFIXES = (".md", ".markdown", ".txt")
#: corpora shipped in ``fair_forge_beam/data/regulatory/<name>/``
PACKAGED_CORPORA = ("airline", "callcenter")


class RegulatoryDocument(NamedTuple):
    """One policy document: ``text`` (UTF-8 text, Markdown or plain) and ``source`` (its name,
    e.g. the file name; unique within a corpus)."""

    text: str
    source: str


class CorpusChunk(NamedTuple):
    """One chunk of a document: ``source``, ``chunk_index`` (0-based position in its document,
    no gaps), ``text`` (stripped, non-empty), ``start`` (character offset in the document)."""

    source: str
    chunk_index: int
    text: str
    start: int


class CorpusConnector(ABC):
    """Loads the policy corpus (spec §7 ``CorpusConnector``)."""

    @abstractmethod
    def load_documents(self) -> list[RegulatoryDocument]:
        """The corpus documents (may be empty). Raises on an unreadable source."""


class ListCorpusConnector(CorpusConnector):
    """Documents given in memory (``RegulatoryDocument`` items or ``(text, source)`` pairs).

    Raises:
        ValueError: an item that is not a ``(str, str)`` pair, or a repeated ``source``.
    """

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(self, documents: Sequence[Union[RegulatoryDocument, tuple]]):
        docs = []
        for i, d in enumerate(documents):
            try:
                text, source = d
            except (TypeError, ValueError):
                raise ValueError(f"documents[{i}] must be a (text, source) pair, got {type(d).__name__}") from None
            if not isinstance(text, str) or not isinstance(source, str):
                raise ValueError(f"documents[{i}]: text and source must be str")
            docs.append(RegulatoryDocument(text, source))
        _check_unique(docs)
        self.documents = docs

    def load_documents(self) -> list[RegulatoryDocument]:
        return list(self.documents)


def _check_unique(docs: Sequence[RegulatoryDocument]) -> None:
    seen = set()
    for d in docs:
        if d.source in seen:
            raise ValueError(f"two corpus documents have the same source {quoted(d.source)}")
        seen.add(d.source)


class LocalCorpusConnector(CorpusConnector):
    """Policy files on the local disk (spec §9 ``LocalCorpusConnector``, extended).

    Args:
        path: a folder (every file directly inside it whose suffix is in ``suffixes``; with
            ``recursive=True`` also in sub-folders) or a single file of any suffix.
        suffixes: file suffixes to read from a folder (default ``.md``, ``.markdown``, ``.txt``;
            upstream reads ``.md`` only).
        recursive: also read sub-folders; ``source`` is then the path relative to ``path``.

    ``source`` = the file name (relative path when recursive). Files are read as UTF-8 in sorted
    order of ``source``, so chunk order and retrieval ties never depend on the filesystem.

    Raises:
        FileNotFoundError: (at construction) ``path`` does not exist.
        ValueError: (at ``load_documents``) a file is not valid UTF-8 text or cannot be read; the
            message names the file.

    An existing folder with no matching file gives ``[]`` and a logged warning (the metric then
    dead-letters every interaction with the reason "empty corpus", never crashes).
    """

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(self, path: Union[str, os.PathLike], suffixes: Sequence[str] = CORPUS_SUFFIXES, recursive: bool = False):
        self.path = Path(path)
        if not self.path.exists():
            raise FileNotFoundError(f"regulatory corpus not found: {self.path} (give a folder of .md/.txt policies or one file)")
        self.suffixes = tuple(s.lower() for s in suffixes)
        self.recursive = bool(recursive)

    def _files(self) -> list[tuple[str, Path]]:
        if self.path.is_file():
            return [(self.path.name, self.path)]
        it = self.path.rglob("*") if self.recursive else self.path.iterdir()
        out = []
        for f in it:
            if f.is_file() and f.suffix.lower() in self.suffixes:
                out.append((f.relative_to(self.path).as_posix(), f))
        return sorted(out)

    def load_documents(self) -> list[RegulatoryDocument]:
        files = self._files()
        if not files:
            _LOG.warning("regulatory corpus %s holds no %s files", self.path, "/".join(self.suffixes))
        docs = []
        for name, p in files:
            try:
                docs.append(RegulatoryDocument(read_side_text(p, "regulatory corpus file"), name))
            except (UnicodeDecodeError, OSError) as exc:
                why = (f"not UTF-8 text ({exc.reason} at byte {exc.start:,})" if isinstance(exc, UnicodeDecodeError)
                       else plain_reason(exc))  # the file is named here already
                raise ValueError(f"regulatory corpus file {p} cannot be read as UTF-8 text ({why}); "
                                 "remove it or convert it to .md/.txt") from None
        return docs

    def __repr__(self) -> str:
        return f"LocalCorpusConnector({str(self.path)!r})"


def packaged_corpus(name: str) -> LocalCorpusConnector:
    """Connector for a corpus shipped with the package: ``"airline"`` (τ-bench airline agent
    policy, MIT, Sierra) or ``"callcenter"`` (written for this project). Attribution:
    ``fair_forge_beam/data/regulatory/NOTICE.md``.

    Raises:
        ValueError: unknown name (lists the shipped ones).
    """
    if name not in PACKAGED_CORPORA:
        raise ValueError(f"unknown packaged corpus {quoted(name)}; shipped: {', '.join(PACKAGED_CORPORA)}")
    base = importlib.resources.files("fair_forge_beam").joinpath(f"data/regulatory/{name}")
    return LocalCorpusConnector(str(base))


class ChunkerConfig(NamedTuple):
    """Chunking parameters, in characters (spec §6.8 defaults: 1000 / 100).

    Build it with :meth:`make` (validates). ``chunk_size`` ≥ 1 is the most characters in a chunk;
    ``chunk_overlap`` in ``[0, chunk_size)`` the most characters two neighbouring chunks share.
    """

    chunk_size: int = 1000
    chunk_overlap: int = 100

    @classmethod
    def make(cls, chunk_size: int = 1000, chunk_overlap: int = 100) -> "ChunkerConfig":
        """Validated config.

        Raises:
            ValueError: a non-integer value, ``chunk_size < 1``, ``chunk_overlap < 0`` or
                ``chunk_overlap >= chunk_size`` (each window would not advance: upstream loops
                forever, spec §17 item 20).
        """
        for name, v in (("chunk_size", chunk_size), ("chunk_overlap", chunk_overlap)):
            if isinstance(v, bool) or not isinstance(v, int):
                raise ValueError(f"{name} must be an int, got {quoted(v)}")
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1 character, got {chunk_size}")
        if chunk_overlap < 0:
            raise ValueError(f"chunk_overlap must be >= 0, got {chunk_overlap}")
        if chunk_overlap >= chunk_size:
            raise ValueError(
                f"chunk_overlap ({chunk_overlap}) must be smaller than chunk_size ({chunk_size}): "
                "chunks could never advance through the text"
            )
        return cls(int(chunk_size), int(chunk_overlap))


_MANY_NEWLINES = re.compile(r"\n{3,}")


def _is_markdown(source: str) -> bool:
    return source.lower().endswith((".md", ".markdown"))


def chunk_document(doc: RegulatoryDocument, config: ChunkerConfig) -> list[CorpusChunk]:
    """Split one document into :class:`CorpusChunk` items, in document order.

    Runs of three or more newlines are first collapsed to two (as upstream); Markdown sources
    (``.md``/``.markdown``) are split with ``semantic_text_splitter.MarkdownSplitter`` (headings,
    then blocks, paragraphs, sentences, words), other text with its ``TextSplitter``. Chunks are
    whitespace-trimmed, at most ``config.chunk_size`` characters, and empty chunks are never
    produced (indices have no gaps, unlike upstream). Pure function of the text and config.

    Raises:
        ValueError: ``config`` breaks the :meth:`ChunkerConfig.make` rules.
    """
    config = ChunkerConfig.make(config.chunk_size, config.chunk_overlap)
    from semantic_text_splitter import MarkdownSplitter, TextSplitter

    text = _MANY_NEWLINES.sub("\n\n", doc.text.replace("\r\n", "\n"))
    cls = MarkdownSplitter if _is_markdown(doc.source) else TextSplitter
    splitter = cls(config.chunk_size, overlap=config.chunk_overlap, trim=True)
    out = []
    for start, piece in splitter.chunk_indices(text):
        if not is_blank(piece):
            out.append(CorpusChunk(doc.source, len(out), piece, int(start)))
    return out
