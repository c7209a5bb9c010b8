"""Markdown context loader (spec §10 ``LocalMarkdownLoader``) with unique chunk ids.

Rules (spec §10), with the differences marked *here*:

* ``load(source)``: a file, a list of files (each must exist), a glob (recursive, sorted) or a
  directory (every ``.md`` / ``.markdown`` below it, sorted); nothing found → ``FileNotFoundError``.
* Per file: split on ATX headers (``#`` … ``######`` followed by a space) whose level is in
  ``header_levels``; text before the first header is the section ``"Introduction"``; deeper
  headers stay in the body. A section's content is its header line and body, stripped; sections
  with no body are dropped. *Here* lines inside fenced code blocks (```` ``` ```` / ``~~~``) are
  never headers (upstream splits a ``# comment`` inside a code block).
* Chunk id ``<file stem slug>_<header slug>`` (slug: lower case, runs of non-alphanumerics → one
  ``_``, trimmed, Unicode letters kept; empty → ``section_<i>``, ``i`` the 1-based section number).
* A section longer than ``max_chunk_size`` characters is split by size: a window of
  ``max_chunk_size`` characters, pulled back to its last paragraph break (``"\\n\\n"``) when that
  lies beyond ``min_chunk_size``, else to just after its last ``". "`` (same rule), else cut hard;
  each piece stripped; ids ``<id>_part<j>`` (j from 1); the next window starts ``overlap``
  characters before the end (*here* always at least one character further, so splitting ends).
* A file without any header chunk is size-split whole (id ``<file stem slug>``).
* ``metadata`` = ``{header, chunking_method ("header" / "size"), source_file}``.
* *Here* chunk ids are unique over one ``load``: a repeated id (two sections with the same
  header, or two files with the same stem) gets ``_2``, ``_3``, … in load order (upstream gives
  duplicate ids, spec §10).
"""
from __future__ import annotations

import glob as _glob
import importlib.resources
import os
import re
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Iterable, Sequence, Union

from fair_forge_beam.blank import is_blank
from fair_forge_beam.generators.schemas import Chunk
from fair_forge_beam.io.edge import read_side_text
from fair_forge_beam.quoting import quoted
from fair_forge_beam.arguments import checks_arguments

__all__ = ["BaseContextLoader", "LocalMarkdownLoader", "create_markdown_loader", "create_context_loader",
           "packaged_corpus_path", "CORPORA", "slug"]

CORPORA = ("airline", "callcenter")
"""Corpora shipped in the package (``fair_forge_beam/data/corpora/<name>/``)."""

_HEADER_RE = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
_FENCE_RE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
_SLUG_RE = re.compile(r"[\W_]+")
_MD_EXT = (".md", ".markdown")

Source = Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]]


def slug(text: str) -> str:
    """Lower case, runs of non-alphanumeric characters (Unicode letters and digits are kept) →
    ``_``, trimmed of ``_``."""
    return _SLUG_RE.sub("_", text.lower()).strip("_")


def packaged_corpus_path(name: str) -> str:
    """Folder of a shipped corpus (``airline`` or ``callcenter``). Raises ``ValueError`` for
    another name."""
    if name not in CORPORA:
        raise ValueError(f"unknown corpus {quoted(name)}; shipped corpora: {', '.join(CORPORA)} (or give a path)")
    return str(importlib.resources.files("fair_forge_beam").joinpath("data", "corpora", name))


class BaseContextLoader(ABC):
    """Loads context documents as :class:`~fair_forge_beam.generators.schemas.Chunk` lists (spec §7)."""

    @abstractmethod
    def load(self, source: Source) -> list[Chunk]:
        ...


class LocalMarkdownLoader(BaseContextLoader):
    """Markdown files → chunks (rules in the module docstring).

    Args:
      max_chunk_size: characters per chunk (> 0).
      min_chunk_size: a size split is pulled back to a paragraph or sentence end only beyond this
        many characters (0 ≤ min < max).
      overlap: characters shared by consecutive size-split pieces (0 ≤ overlap < max).
      header_levels: ATX levels (1–6) that start a section.

    Raises ``ValueError`` on invalid sizes or levels.
    """

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(self, max_chunk_size: int = 2000, min_chunk_size: int = 200, overlap: int = 100,
                 header_levels: Iterable[int] = (1, 2, 3)):
        for name, v in (("max_chunk_size", max_chunk_size), ("min_chunk_size", min_chunk_size), ("overlap", overlap)):
            if isinstance(v, bool) or not isinstance(v, int):
                raise ValueError(f"{name} must be an integer, got {quoted(v)}")
        if max_chunk_size < 1:
            raise ValueError(f"max_chunk_size must be >= 1, got {max_chunk_size}")
        if not 0 <= min_chunk_size < max_chunk_size:
            raise ValueError(f"min_chunk_size must be in [0, max_chunk_size), got {min_chunk_size}")
        if not 0 <= overlap < max_chunk_size:
            raise ValueError(f"overlap must be in [0, max_chunk_size) (else splitting never ends), got {overlap}")
        levels = tuple(sorted(set(int(x) for x in header_levels)))
        if not levels or any(not 1 <= x <= 6 for x in levels):
            raise ValueError(f"header_levels must be a non-empty subset of 1..6, got {list(header_levels)}")
        self.max_chunk_size, self.min_chunk_size, self.overlap, self.header_levels = max_chunk_size, min_chunk_size, overlap, levels

    def __repr__(self) -> str:
        return (f"LocalMarkdownLoader(max_chunk_size={self.max_chunk_size}, min_chunk_size={self.min_chunk_size}, "
                f"overlap={self.overlap}, header_levels={list(self.header_levels)})")

    # -- files ---------------------------------------------------------------------------------
    @staticmethod
    def resolve(source: Source) -> list[Path]:
        """The files ``source`` names, in load order. Raises ``FileNotFoundError``."""
        if isinstance(source, (list, tuple)):
            files = [Path(s) for s in source]
            missing = [str(f) for f in files if not f.is_file()]
            if missing:
                raise FileNotFoundError(f"context file(s) not found: {', '.join(missing)}")
            if not files:
                raise FileNotFoundError("no context files given")
            return files
        p = Path(source)
        if p.is_file():
            return [p]
        if p.is_dir():
            files = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in _MD_EXT)
        elif _glob.has_magic(str(source)):
            files = sorted(Path(f) for f in _glob.glob(str(source), recursive=True) if Path(f).is_file())
        else:
            files = []
        if not files:
            raise FileNotFoundError(f"no Markdown files found at {source}")
        from fair_forge_beam.plain import first_path_name_problem

        bad_name = first_path_name_problem((str(f) for f in files), "context files")
        if bad_name:  # a name that is not UTF-8 text (issue 28 B7)
            raise ValueError(bad_name)
        return files

    def load(self, source: Source) -> list[Chunk]:
        """Chunks of every file of ``source`` (file, list, glob or folder), ids unique."""
        chunks: list[Chunk] = []
        for f in self.resolve(source):
            chunks.extend(self.chunk_text(read_side_text(f, "generator source file"), f.stem, str(f)))
        return _unique_ids(chunks)

    # -- one document --------------------------------------------------------------------------
    def sections(self, text: str) -> list[tuple]:
        """``(header, content)`` per non-empty section (content includes the header line,
        stripped); header ``None`` for the text before the first header."""
        out: list[tuple, list[str]] = [(None, [])]  # None: the text before the first header
        fence = None
        for line in text.splitlines():
            m = _FENCE_RE.match(line)
            if m:
                mark = m.group(1)
                if fence is None:
                    fence = mark[0] * 3
                elif mark.startswith(fence):
                    fence = None
            h = None if fence is not None or m else _HEADER_RE.match(line)
            if h and len(h.group(1)) in self.header_levels:
                out.append((h.group(2).strip(), [line]))
            else:
                out[-1][1].append(line)
        result = []
        for i, (header, lines) in enumerate(out):
            body = lines[1:] if i else lines
            if not is_blank("\n".join(body)):
                result.append((header, "\n".join(lines).strip()))
        return result

    def chunk_text(self, text: str, stem: str, source_file: str = "") -> list[Chunk]:
        """Chunks of one document named ``stem`` (ids not yet made unique across files)."""
        base = slug(stem) or "document"
        chunks: list[Chunk] = []
        secs = self.sections(text)
        if all(h is None for h, _ in secs):
            return self._size_chunks(text.strip(), base, "Introduction", source_file) if not is_blank(text) else []
        for i, (header, content) in enumerate(secs, start=1):
            header = "Introduction" if header is None else header
            cid = f"{base}_{slug(header) or f'section_{i}'}"
            if len(content) <= self.max_chunk_size:
                chunks.append(Chunk(content=content, chunk_id=cid,
                                    metadata={"header": header, "chunking_method": "header", "source_file": source_file}))
            else:
                chunks.extend(self._size_chunks(content, cid, header, source_file))
        return chunks

    def split_by_size(self, text: str) -> list[str]:
        """Pieces of ``text`` by the size rule (module docstring), stripped, empty ones dropped."""
        n, mx, mn = len(text), self.max_chunk_size, self.min_chunk_size
        pieces, start = [], 0
        while start < n:
            end = min(start + mx, n)
            if end < n:
                window = text[start:end]
                para = window.rfind("\n\n")
                sent = window.rfind(". ")
                if para > mn:
                    end = start + para
                elif sent > mn:
                    end = start + sent + 1
            piece = text[start:end].strip()
            if piece:
                pieces.append(piece)
            if end >= n:
                break
            start = max(end - self.overlap, start + 1)
        return pieces

    def _size_chunks(self, text: str, cid: str, header: str, source_file: str) -> list[Chunk]:
        return [
            Chunk(content=piece, chunk_id=f"{cid}_part{j}",
                  metadata={"header": header, "chunking_method": "size", "source_file": source_file})
            for j, piece in enumerate(self.split_by_size(text), start=1)
        ]


def _unique_ids(chunks: list[Chunk]) -> list[Chunk]:
    seen: set[str] = {c.chunk_id for c in chunks}
    counts: dict[str, int] = {}
    out = []
    for c in chunks:
        k = counts[c.chunk_id] = counts.get(c.chunk_id, 0) + 1
        if k == 1:
            out.append(c)
            continue
        j = k
        while f"{c.chunk_id}_{j}" in seen:
            j += 1
        new = f"{c.chunk_id}_{j}"
        seen.add(new)
        out.append(c.model_copy(update={"chunk_id": new}))
    return out


def create_markdown_loader(max_chunk_size: int = 2000, min_chunk_size: int = 200, overlap: int = 100,
                           header_levels: Iterable[int] = (1, 2, 3)) -> LocalMarkdownLoader:
    """A :class:`LocalMarkdownLoader` (same arguments)."""
    return LocalMarkdownLoader(max_chunk_size, min_chunk_size, overlap, header_levels)


def create_context_loader(loader_type: str = "markdown", **kwargs) -> BaseContextLoader:
    """``"markdown"`` → :class:`LocalMarkdownLoader` (``kwargs`` passed on); any other type →
    ``ValueError``."""
    if loader_type != "markdown":
        raise ValueError(f"unknown context loader type {quoted(loader_type)}; supported: 'markdown'")
    return LocalMarkdownLoader(**kwargs)
