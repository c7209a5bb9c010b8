"""Anthropic hh-rlhf preference pairs as sessions with two assistants (for BestOf and others).

Each JSONL record ``{"chosen": transcript, "rejected": transcript}`` (transcripts in the
``"\\n\\nHuman: …\\n\\nAssistant: …"`` format, optionally gzip-compressed) becomes **one**
``session_id`` (``hh-<record number, 5 digits>``) answered by two assistants, ``chosen`` and
``rejected``: each Human turn and the Assistant text after it form one interaction
(``qa_id`` ``q00``, ``q01``, …; consecutive Assistant segments are joined by a blank line; a
Human turn without a reply gets an empty answer). The two transcripts share every turn but
the last, so a BestOf block compares the final answers in their shared context. No reference
answers (``ground_truth_assistant`` None).

A record that cannot be parsed (not JSON, a transcript missing or without a Human turn, or with
text or an Assistant turn before its first Human turn, which no turn would hold) is
listed in :attr:`HHRLHFPairs.skipped` with its reason and, in a run, is a dead letter (plain
reason, the line as ``raw``, file and byte offset as ``source``): never a silent skip. The file is
read as the audit reads JSON Lines: a compressed file cut short keeps its records before the cut. Source: anthropics/hh-rlhf (MIT).
"""
from __future__ import annotations

import re
from typing import Any, Optional

from fair_forge_beam.io.retriever import Retriever
from fair_forge_beam.schemas.common import IterationLevel
from fair_forge_beam.plain import json_kind, plain_reason
from fair_forge_beam.quoting import quoted

__all__ = ["HHRLHFPairs", "parse_transcript", "hh_rlhf_sessions"]

_MARK = re.compile(r"\n\n(Human|Assistant): ")


def parse_transcript(text: str) -> list[tuple[str, str]]:
    """``[(human text, assistant text), …]`` of one transcript.

    Raises ``ValueError`` when the text is not a string, has no Human turn, or has text or an
    Assistant turn before the first Human turn (it would be left out of the mapped turns)."""
    if not isinstance(text, str):
        raise ValueError(f"transcript must be text, got {type(text).__name__}")
    parts = _MARK.split("\n\n" + text.lstrip("\n") if not text.startswith("\n\n") else text)
    # parts = [prefix, role, text, role, text, ...]
    if parts[0].strip():  # never left out: text before the first turn belongs to none
        raise ValueError(f"text before the first 'Human:' turn ({quoted(parts[0].strip(), 40)}): it belongs to no turn")
    turns: list[list[str]] = []
    for role, body in zip(parts[1::2], parts[2::2]):
        body = body.strip()
        if role == "Human":
            turns.append([body, ""])
        elif turns:
            turns[-1][1] = f"{turns[-1][1]}\n\n{body}" if turns[-1][1] else body
        else:
            raise ValueError("an 'Assistant:' turn before the first 'Human:' turn: it answers no query")
    if not turns:
        raise ValueError("no 'Human:' turn in the transcript")
    return [(q, a) for q, a in turns]


def _hh_records(path: str, limit: Optional[int], max_record_bytes: Optional[int]):
    """``(record number, session dicts or ReadError)`` of each line of ``path`` up to ``limit``, read by
    the audit's reader (:func:`~fair_forge_beam.io.read.jsonl_file_lines`, :func:`~fair_forge_beam.io.read.line_record`):
    a record it cannot use is a ``ReadError`` with a plain reason, the line as ``raw`` and its file and
    byte offset as ``at`` (the reason does not repeat them); a compressed file cut short gives its
    complete lines, then one ``ReadError`` saying what is missing; a damaged one that ``ReadError`` alone."""
    from fair_forge_beam.io.read import MAX_RECORD_BYTES, ReadError, jsonl_file_lines, line_record

    max_record_bytes = MAX_RECORD_BYTES if max_record_bytes is None else int(max_record_bytes)
    i = 0
    for file, pos, line in jsonl_file_lines(str(path), max_record_bytes):
        if limit is not None and i >= limit:
            return
        if isinstance(line, ReadError):  # a line over the limit, or what a damaged or cut file is missing
            rec, reason, raw = None, line.reason, line.raw
        else:
            got = line_record(line, max_record_bytes)
            if got is None:  # a blank line: no record
                i += 1
                continue
            rec, reason, raw = got
        if reason is None and not isinstance(rec, dict):
            reason = f"record is {json_kind(rec)}, not an object"
        if reason is None:
            try:
                pair = {v: _transcript(rec, v) for v in ("chosen", "rejected")}
            except ValueError as exc:
                reason = plain_reason(exc)
        if reason is not None:
            yield i, ReadError(reason, raw, (file, pos))
        else:
            yield i, [{
                "session_id": f"hh-{i:05d}", "assistant_id": variant, "language": "english", "context": "",
                "conversation": [{"qa_id": f"q{k:02d}", "query": q, "assistant": a, "ground_truth_assistant": None}
                                 for k, (q, a) in enumerate(turns)],
            } for variant, turns in pair.items()]
        i += 1


def _transcript(rec: dict, field: str) -> list[tuple[str, str]]:
    """The turns of ``rec[field]``; ``ValueError`` naming the field when it is missing or unusable."""
    if field not in rec:
        raise ValueError(f"no {quoted(field)} transcript")
    if not isinstance(rec[field], str):
        raise ValueError(f"the {quoted(field)} transcript is {json_kind(rec[field])}, not text")
    try:
        return parse_transcript(rec[field])
    except ValueError as exc:
        raise ValueError(f"the {quoted(field)} transcript: {plain_reason(exc)}") from None


def hh_rlhf_sessions(path: str, limit: Optional[int] = None, skipped: Optional[list] = None,
                     max_record_bytes: Optional[int] = None) -> list[dict[str, Any]]:
    """Sessions (dicts in the ``Dataset`` shape) of the first ``limit`` records of ``path`` (any
    compression :func:`~fair_forge_beam.io.edge.open_input` reads), read line by line in bounded
    pieces as the audit reads them (:func:`~fair_forge_beam.io.read.jsonl_file_lines`): a line over
    ``max_record_bytes`` (default: ``--max-record-bytes``'s, :data:`~fair_forge_beam.io.read.MAX_RECORD_BYTES`)
    is never held whole; a compressed file cut short gives its records before the cut.

    Unparseable records, lines over the limit and what a damaged or cut compressed file is missing are
    left out and, when ``skipped`` is a list, appended to it as ``(record number, reason)``. Raises ``OSError`` when the file cannot be opened."""
    out: list[dict[str, Any]] = []
    for i, got in _hh_records(path, limit, max_record_bytes):
        if isinstance(got, list):
            out.extend(got)
        elif skipped is not None:
            skipped.append((i, got.reason))
    return out


class HHRLHFPairs(Retriever):
    """Retriever of hh-rlhf pairs: ``HHRLHFPairs(path=..., limit=None, max_record_bytes=None)``
    (full-dataset level; ``None``: the default record limit).

    ``load_dataset()`` returns the session dicts of :func:`hh_rlhf_sessions` and, in file order, a
    :class:`~fair_forge_beam.io.read.ReadError` for each record it cannot use (a dead letter: plain
    reason, the line as ``raw``, the file and byte offset as ``source``; counted in the summary);
    ``skipped`` lists ``(record number, reason)`` of those records."""

    @property
    def iteration_level(self) -> IterationLevel:
        return IterationLevel.FULL_DATASET

    def load_dataset(self):
        self.skipped: list = []
        out: list = []
        for i, got in _hh_records(self.kwargs["path"], self.kwargs.get("limit"), self.kwargs.get("max_record_bytes")):
            if isinstance(got, list):
                out.extend(got)
            else:
                self.skipped.append((i, got.reason))
                out.append(got)
        return out
