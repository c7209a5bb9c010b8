"""Dead-letter reasons grouped for what a user reads: ``results.json``'s ``dead_letter_reasons``
and ``rejected_at_read_reasons``, the stored counts of ``stats/manifest.json``, the console, the
report's dead-letter table and a loop stage's summary.

Reasons are grouped by their *class* (:func:`reason_class`: the reason with the numbers of its own
record masked, ``"line 7"`` and ``"line 9"`` are one class), but a group is *shown* by one real
reason of it and its count (:func:`shown_reasons`): the smallest reason of the group, marked
``"e.g. "`` when the group holds reasons that differ. A fresh user (fresh13) read the class itself,
``"invalid answer after N attempt(s)"`` and ``"UTF-N"``, as a broken template.

A group's accumulator is ``{(stage, class): [example, count, varied]}`` (:func:`add_reason`,
:func:`merge_reasons`): its size grows with the classes, never with the records, and the example
and the mark do not depend on the order the reasons come in (a runner merges in any order).
"""
from __future__ import annotations

import re

__all__ = ["EXAMPLE_MARK", "NEGATION", "REASON_LIMIT", "reason_class", "cut_reason", "add_reason", "merge_reasons", "shown_reasons",
           "group_reasons"]

#: what starts a shown group whose reasons differ (its example is one of them)
EXAMPLE_MARK = "e.g. "

_NUMBER = re.compile(r"(?<![\w.+-])(?<![\w.]:)(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w-])(?!,\d{3})(?!\.?\w)(?!:\d)")

#: the words before a number that is not a record's own (a code, a limit, an option's value): the
#: number stays in a reason class (:func:`reason_class`)
_KEPT_NUMBER = re.compile(r"(?:\bHTTP|\bstatus|\bErrno|\blimit(?: of)?|\blimited to|\bat most|\bup to|\bmore than|\bmax(?:imum)?"
                          r"|\b(?:less|greater) than(?: or equal to)?|\bmultiple of"
                          r"|(?<![\w-])--[a-z][\w-]*|/)[ =]$", re.IGNORECASE)


def reason_class(reason: str) -> str:
    """The class of a reason, the key reasons are grouped by, never shown (:func:`shown_reasons`
    shows a real reason of the class). Reasons that differ only in free-standing numbers of their own record (positions,
    indices, counts, sizes: ``"line 7"`` → ``"line N"``, ``"record of 70,001 bytes"`` → ``"record of N
    bytes"``) and hex byte values (``0x9c`` → ``0xNN``); digits inside a word or name stay (``UTF-8``,
    ``bad2.jsonl``, ``e5``), and so do numbers that are the run's or the reason itself (``HTTP 500``,
    ``[Errno 28]``, ``over the limit of 65,536 bytes``, ``--max-record-bytes 65,536``: :data:`_KEPT_NUMBER`),
    so a reason kind still reads as the reason. A kind
    longer than 160 characters keeps its first 100 and its last 57 (`` … `` between): the cause is
    usually said last (``batch.qa_id: …; …: Field required``, ``HTTP 500: <body> … the real error``),
    and a cut at the start lost it (trial 28)."""
    if reason.startswith(EXAMPLE_MARK):  # a shown group (a roll-up's stored counts): its example's class
        reason = reason[len(EXAMPLE_MARK):]
    kind = re.sub(r"\b0x[0-9a-fA-F]+\b", "0xNN", reason)
    # a number with thousands separators is one number ("1,048,576 bytes" -> "N bytes", not "N,N,N");
    # a number that is not the record's own stays (_KEPT_NUMBER): a status or error code is the reason
    # itself ("HTTP 429", "HTTP 500", "[Errno 28]"), a limit is the run's ("over the limit of
    # 1,048,576 bytes", "--max-record-bytes 65,536", "limited to 64 levels", "at most 5")
    kind = _NUMBER.sub(lambda m: m.group(0) if _KEPT_NUMBER.search(m.string, max(0, m.start() - 48), m.start())
                       else "N", kind)
    return cut_reason(kind)


#: most characters of a shown reason (:func:`cut_reason`)
REASON_LIMIT = 160
#: characters of a long reason's end kept, at least (its cause is usually said last)
_TAIL = 57
#: most characters of a long reason's end when it starts at its clause's start (a whole last clause)
_TAIL_MAX = 100
#: where a clause of a reason starts: after ``: ``, ``; ``, ``, ``, a dash, and at ``(``
_CLAUSE_START = re.compile(r"(?<=[:;,] )|(?<= [—–] )|(?<= )(?=\()")
#: the words that turn a clause into its opposite: a cut never drops one from a clause it shows part of
NEGATION = re.compile(r"\b(?:not|no|never|none|nothing|nor|neither|cannot|without)\b|\b\w+n't\b", re.IGNORECASE)


def _clause_start(kind: str, at: int) -> int:
    """Where the clause of ``kind`` holding position ``at`` starts (0: its first clause)."""
    starts = [m.start() for m in _CLAUSE_START.finditer(kind, 0, at + 1)]
    return starts[-1] if starts else 0


def _words_up_to(text: str, room: int, floor: int = 0) -> str:
    """``text`` cut to ``room`` characters between words (past ``floor``: a text without a space
    there is cut where ``room`` falls)."""
    if len(text) <= room:
        return text
    cut = text[:room]
    space = cut.rfind(" ", floor)
    return cut[:space].rstrip() if space > 0 else cut


def _head(kind: str, room: int, t: int) -> str:
    """The start of ``kind`` shown before `` … ``: at most ``room`` characters, ending between
    words, at a clause's end when one is near; and never inside a clause whose words up to the
    end's start ``t`` (those the cut drops) hold a negation: it then ends before that clause."""
    if kind[room:room + 1] in (" ", ""):
        head = kind[:room]
    else:
        ends = [m.start() for m in _CLAUSE_START.finditer(kind, max(room - 25, 40), room + 1)]
        head = kind[:ends[-1]] if ends else _words_up_to(kind, room, min(60, room // 2))
    h = len(head)
    after = [m.start() for m in _CLAUSE_START.finditer(kind, h + 1, t)]
    if NEGATION.search(kind, h, after[0] if after else t):
        start = _clause_start(kind, h)
        if start > 0:
            head = kind[:start]
    return head.rstrip()


def cut_reason(kind: str) -> str:
    """``kind`` as it is when at most 160 characters, else its start and its end with `` … ``
    between (see :func:`reason_class`), cut so that it never says what ``kind`` does not: the end
    is its whole last clauses (each starts after ``: ``, ``; ``, ``, `` or at ``(``), as many as fit
    in 100 characters, or when the last does not fit, starts at a word; the start ends between words. A clause shown in part
    keeps every negation of it (``not``, ``no``, ``cannot`` …): trial40 J6's ``the answer: is not
    valid JSON (…)`` read ``the answer: is … valid JSON (…)``. A negation too far from the end to be
    in it is shown with the words after it and a second `` …``, as is the last negation of a reason
    whose start and end hold none."""
    if len(kind) <= REASON_LIMIT:
        return kind
    # the end: from a word up to 15 characters before its 57 (a cut inside a word lost "incor" of
    # "incorrect header check"), moved back to the first of the whole trailing clauses that fit
    start = len(kind) - _TAIL
    space = kind.rfind(" ", start - 15, start + 1)
    t = space + 1 if space != -1 else start
    # a reason's first item ("…: queries: is required but missing; insight: …") is its main cause: shown whole
    # when it fits beside the end's whole last clauses, which then take the room left (the end's clauses
    # alone had left the start "…: queries:")
    first = kind.find("; ")
    if 0 < first <= REASON_LIMIT - 3 - (len(kind) - t):
        room = REASON_LIMIT - 3 - first
        fits = [m.start() for m in _CLAUSE_START.finditer(kind, max(len(kind) - min(_TAIL_MAX, room), first + 2))]
        if fits:
            return kind[:first] + " … " + kind[fits[0]:]
    fits = [m.start() for m in _CLAUSE_START.finditer(kind, max(len(kind) - _TAIL_MAX, 1), t + 1)]
    if fits:  # whole trailing clauses, as many as fit: "extra_key: is not a field …" keeps its key
        t = fits[0]
    c = _clause_start(kind, t)
    negations = [m.start() for m in NEGATION.finditer(kind, c, t)] if c < t else []
    n = negations[-1] if negations else None
    if n is not None and len(kind) - n <= _TAIL_MAX:
        t, n = n, None
    head = _head(kind, REASON_LIMIT - 3 - (len(kind) - t), t)
    dropped = [m.start() for m in NEGATION.finditer(kind, len(head), t)]
    if n is None and dropped and not NEGATION.search(head) and not NEGATION.search(kind, t):
        n = dropped[-1]  # the reason's only negations are in what the cut drops: one of them is shown
    if n is not None and n >= len(head):  # too far back for the end, not in the start: its words, then " … "
        middle = _words_up_to(kind[n:t].rstrip(), 40, 1)
        head = _head(kind, REASON_LIMIT - 6 - len(middle) - (len(kind) - t), t)
        return head + " … " + middle + " … " + kind[t:]
    return head + " … " + kind[t:]


def add_reason(groups: dict, stage: str, reason: str, n: int = 1) -> tuple:
    """Count ``n`` records of ``stage`` with ``reason`` (a reason, or a group as
    :func:`shown_reasons` shows it) into ``groups``; returns the group's key ``(stage, class)``."""
    varied = reason.startswith(EXAMPLE_MARK)
    full = reason[len(EXAMPLE_MARK):] if varied else reason
    text = cut_reason(full)
    key = (stage, reason_class(full))
    _put(groups, key, text, n, varied)
    return key


def _put(groups: dict, key, text: str, n: int, varied: bool) -> None:
    """Add ``n`` reasons shown as ``text`` to the group ``key`` (made when new)."""
    g = groups.get(key)
    if g is None:
        groups[key] = [text, n, varied]
    else:
        _join(g, text, n, varied)


def _join(g: list, text: str, n: int, varied: bool) -> None:
    if text != g[0]:
        g[2] = True
        if text < g[0]:
            g[0] = text
    g[1] += n
    g[2] = g[2] or varied


def merge_reasons(into: dict, other: dict) -> dict:
    """Add the groups ``other`` to ``into``; returns ``into``."""
    for key, (text, n, varied) in other.items():
        _put(into, key, text, n, varied)
    return into


def shown_reasons(groups: dict) -> dict:
    """``{(stage, shown reason): count}`` of ``groups``: each group by its example, marked
    :data:`EXAMPLE_MARK` when its reasons differ."""
    out: dict = {}
    for (stage, _), (text, n, varied) in groups.items():
        key = (stage, EXAMPLE_MARK + text if varied else text)
        out[key] = out.get(key, 0) + n
    return out


def group_reasons(reasons) -> dict:
    """``{shown reason: count}`` of an iterable of reasons (one stage)."""
    groups: dict = {}
    for r in reasons:
        add_reason(groups, "", r)
    return {r: n for (_, r), n in shown_reasons(groups).items()}
