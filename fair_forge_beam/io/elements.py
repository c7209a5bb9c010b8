"""Element types that travel through the pipeline (DESIGN §3).

Pydantic validates at the edge (read); inside the graph elements are compact ``NamedTuple``s
with registered deterministic JSON coders (pickled pydantic models halve throughput and are
non-deterministic as shuffle keys, DESIGN §9).
"""
from __future__ import annotations

import json
from typing import Any, NamedTuple, Optional

from fair_forge_beam._beam import beam

__all__ = ["Interaction", "DeadLetter", "QualityWarning", "make_element_id", "session_unit_key", "dead_letter", "DEAD", "QUALITY",
           "SHOWN_REPEATS", "repeats_named", "InteractionWarning", "session_warning", "add_finding", "merge_findings",
           "findings_warnings", "FindingsFn", "findings_arrow_type", "findings_to_stored", "findings_from_plain"]


class Interaction(NamedTuple):
    """One interaction with its session header.

    ``element_id`` = ``"{session_id}/{assistant_id}/{turn_index}"`` — stable across runs and
    runners. (DESIGN §3 writes ``session_id/turn_index``; the upstream BestOf example reuses one
    ``session_id`` for four assistants, so the assistant is part of the id.) ``turn_index`` is
    the 0-based position in the conversation, fixed at read time.
    """

    element_id: str
    session_id: str
    assistant_id: str
    language: str
    context: str
    turn_index: int
    qa_id: str
    query: str
    assistant: str
    ground_truth_assistant: Optional[str]
    observation: Optional[str]
    weight: Optional[float]
    agentic: Optional[dict]
    ground_truth_agentic: Optional[dict]
    logprobs: Optional[dict]
    event_time: Optional[float] = None
    chatbot_role: Optional[str] = None  # the session's declared role (metric role_adherence)
    spans: Optional[tuple] = None  # expected PII spans as given (metric privacy)
    slice_values: Optional[tuple] = None  # ((field, value or None), …) of the run's metadata slice fields

    def as_record(self) -> dict:
        """The fields as a dict, without ``chatbot_role`` / ``spans`` / ``slice_values`` when they are ``None`` (so
        dead letters of files without them stay byte-identical to before those fields existed)."""
        d = self._asdict()
        for k in _OPTIONAL_TAIL:
            if d[k] is None:
                del d[k]
        return d

    @property
    def session_key(self) -> str:
        """Unambiguous grouping key of the session (see :func:`session_unit_key`)."""
        return session_unit_key(self.session_id, self.assistant_id)


_OPTIONAL_TAIL = ("chatbot_role", "spans", "slice_values")


def _esc(part: str) -> str:
    return part.replace("%", "%25").replace("/", "%2F")


def make_element_id(session_id: str, assistant_id: str, turn_index: int) -> str:
    """``"{session_id}/{assistant_id}/{turn_index}"``, with ``%`` and ``/`` inside the ids
    percent-encoded (``%25``, ``%2F``) so that two different sessions never share an id."""
    return f"{_esc(session_id)}/{_esc(assistant_id)}/{turn_index}"


def session_unit_key(session_id: str, assistant_id: str) -> str:
    """Unambiguous key of a session (JSON array of ``[session_id, assistant_id]``)."""
    return json.dumps([session_id, assistant_id], ensure_ascii=False, separators=(",", ":"))


class DeadLetter(NamedTuple):
    """A record that could not be processed: the stage, why, where (``source`` = ``file:position``
    or the retriever) and the original record (``raw``)."""

    stage: str
    reason: str
    element_id: Optional[str]
    raw: str
    source: Optional[str] = None

    def to_dict(self) -> dict:
        return self._asdict()


class QualityWarning(NamedTuple):
    """A data-quality finding that did not stop processing (e.g. duplicate ``qa_id``)."""

    kind: str
    key: str
    message: str


class InteractionWarning(NamedTuple):
    """A data-quality finding about ``n`` interactions of one session (an answer cut for analysis,
    an empty description, an empty answer, a numeric id), on its way to being the session's one
    warning of that kind (:func:`session_warning`): a component that finds it per answer emits
    this, never a :class:`QualityWarning` per answer (issue 28: 100k answers gave 100k warnings).

    The session's findings of a kind travel in its per-session state (:func:`add_finding`: the
    count and the smallest example, merged in any order): a metric's in the engine's session
    combine (``MetricSpec.interaction_warnings``), the reader's in its record summary
    (``io.read.SessionRecordsCombineFn``). Both are stored statistics, so a roll-up merges the
    parts of a session cut across runs and warns once, as one audit of every run's inputs does.

    ``example``: the finding as said of one interaction; ``element_id`` (``""``: none) is the
    interaction it names, found in ``example`` (a roll-up renumbers it as it renumbers the turns of
    a cut session), and orders the examples by turn (the smallest is the session's first)."""

    kind: str
    session_id: str
    assistant_id: str
    language: str
    n: int
    example: str
    element_id: str = ""


def session_warning(kind: str, session: str, n: int, example: str) -> QualityWarning:
    """The session's one :class:`QualityWarning` of ``kind``: how many of its interactions, and
    the first (smallest) example."""
    if n == 1:
        return QualityWarning(kind, session, f"1 interaction of this session: {example}")
    return QualityWarning(kind, session, f"{n} interactions of this session; the first: {example}")


def _turn_of(element_id: str) -> int:
    """The turn an element id names (``-1``: none): examples are ordered by it, which a roll-up's
    renumbering of a cut session keeps (a run's turns keep their order in the union's)."""
    tail = element_id.rpartition("/")[2] if element_id else ""
    return int(tail) if tail.isdigit() else -1


def _first(element_id: str, head: str, tail: str) -> tuple:
    return (_turn_of(element_id), element_id, head, tail)


def add_finding(acc: dict, kind: str, n: int, example: str, element_id: str = "") -> dict:
    """Add a finding (:class:`InteractionWarning`'s fields) to a session's findings ``acc``
    (``{kind: (n, first)}``, ``first`` the smallest example as ``(turn, element_id, text before it,
    text after it)``); returns ``acc``."""
    head, found, tail = example.partition(element_id) if element_id else (example, "", "")
    return _put(acc, kind, n, _first(element_id if found else "", head, tail))


def _put(acc: dict, kind: str, n: int, first: tuple) -> dict:
    """``n`` more findings of ``kind`` into ``acc``, ``first`` kept if it is the smallest example."""
    had = acc.get(kind)
    acc[kind] = (n, first) if had is None else (had[0] + n, min(had[1], first))
    return acc


def merge_findings(accs) -> dict:
    """Findings accumulators (:func:`add_finding`) merged: counts added, the smallest example kept
    (any order gives the same result)."""
    out: dict = {}
    for acc in accs:
        for kind, (n, first) in (acc or {}).items():
            _put(out, kind, n, first)
    return out


def findings_warnings(acc: dict, session: str) -> list:
    """A session's findings (:func:`add_finding`) as its warnings: one per kind (:func:`session_warning`)."""
    return [session_warning(kind, session, n, f"{head}{element_id}{tail}")
            for kind, (n, (_, element_id, head, tail)) in sorted((acc or {}).items())]


class FindingsFn(beam.CombineFn):
    """A session's findings (:class:`InteractionWarning`) combined: accumulator and output
    ``{kind: (n, first)}`` (:func:`add_finding`; any merge order gives the same result)."""

    def create_accumulator(self):
        return {}

    def add_input(self, acc, w):
        return add_finding(acc, w.kind, w.n, w.example, w.element_id)

    def merge_accumulators(self, accumulators):
        return merge_findings(accumulators)

    def extract_output(self, acc):
        return acc


def findings_arrow_type():
    """The stored type of a session's findings: one struct per kind, its count and its first
    example (``element_id``: the interaction it names, renumbered by a roll-up; the text before
    and after it)."""
    import pyarrow as pa

    return pa.list_(pa.struct([("kind", pa.string()), ("n", pa.int64()), ("element_id", pa.string()),
                               ("example", pa.string()), ("example_end", pa.string())]))


def findings_to_stored(acc: dict) -> list:
    return [(kind, n, element_id or None, head, tail) for kind, (n, (_, element_id, head, tail)) in sorted(acc.items())]


def findings_from_plain(value) -> dict:
    return {kind: (n, _first(element_id or "", head, tail)) for kind, n, element_id, head, tail in value or ()}


#: how many repeated keys one warning names (the others are counted): a session's warning of a kind is
#: one, whatever the number of keys that repeat in it (issue 28)
SHOWN_REPEATS = 3


def repeats_named(counts: Any, show: Any = repr, shown: int = SHOWN_REPEATS) -> Optional[tuple]:
    """``(how many keys repeat, text naming the first `shown` of them)`` of ``counts`` (key → how
    many times it is given; a mapping or its items), ``None`` when no key is given twice. The
    first are the smallest keys (a deterministic choice: the same counts give the same text in
    any order, as a roll-up must), each shown as ``show(key)`` with its count; the text ends with
    how many more. Time linear in the keys, memory in ``shown``."""
    import heapq

    items = counts.items() if hasattr(counts, "items") else counts
    rep = [(k, c) for k, c in items if c > 1]
    if not rep:
        return None
    try:
        first = heapq.nsmallest(shown, rep, key=lambda kc: kc[0])
    except TypeError:  # keys that do not compare (mixed types): by their text
        first = heapq.nsmallest(shown, rep, key=lambda kc: repr(kc[0]))
    text = ", ".join(f"{show(k)} ({c} times)" for k, c in first)
    if len(rep) > len(first):
        text += f" and {len(rep) - len(first)} more"
    return len(rep), text


#: the output tags of what a stage cannot use: dead letters (with the reason and the original
#: record) and data-quality warnings — one spelling for the reader, the engine and every metric
DEAD = "dead_letter"
QUALITY = "quality"


def dead_letter(
    stage: str, reason: str, raw: Any, element_id: Optional[str] = None, source: Optional[str] = None, max_raw: int = 100_000
) -> DeadLetter:
    """Build a :class:`DeadLetter`; non-string ``raw`` is JSON-encoded, long text truncated.

    Never raises on hostile input: a ``raw`` too deeply nested to serialise is replaced by a
    note saying so, and lone surrogates in any of the strings are replaced by their visible
    escape text (``\\ud800``, :func:`~fair_forge_beam.io.edge.scrub_surrogates`), so the dead
    letter can always be written as UTF-8.
    """
    from fair_forge_beam.io.edge import scrub_json_text, scrub_surrogates

    if isinstance(raw, Interaction):
        raw = raw.as_record()
    elif isinstance(raw, dict) and raw.keys() >= set(Interaction._fields):  # an Interaction's ``_asdict()``
        raw = {k: v for k, v in raw.items() if not (k in _OPTIONAL_TAIL and v is None)}
    if not isinstance(raw, str):
        try:
            raw = scrub_json_text(json.dumps(raw, ensure_ascii=False, default=str))
        except RecursionError:
            raw = f"<{type(raw).__name__} nested too deeply to reproduce>"
        except (TypeError, ValueError):
            try:
                raw = repr(raw)
            except RecursionError:
                raw = f"<{type(raw).__name__} nested too deeply to reproduce>"
    if len(raw) > max_raw:
        raw = raw[:max_raw] + f"... [truncated, {len(raw)} characters in all]"
    return DeadLetter(
        stage=scrub_surrogates(stage),
        reason=scrub_surrogates(reason),
        element_id=scrub_surrogates(element_id),
        raw=scrub_surrogates(raw),
        source=scrub_surrogates(source),
    )


class _JsonTupleCoder(beam.coders.Coder):
    """Deterministic JSON coder for a NamedTuple type."""

    def __init__(self, cls):
        self._cls = cls

    # "surrogatepass": a lone surrogate that reached an element (e.g. in a judge's reply)
    # round-trips through the coder instead of failing the bundle; writers scrub it.
    def encode(self, value):
        return json.dumps(list(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode(
            "utf-8", "surrogatepass"
        )

    def decode(self, encoded):
        return self._cls(*json.loads(encoded.decode("utf-8", "surrogatepass")))

    def is_deterministic(self):
        return True

    def to_type_hint(self):
        return self._cls

    def __eq__(self, other):
        return type(self) is type(other) and self._cls is other._cls

    def __hash__(self):
        return hash((type(self), self._cls))


class InteractionCoder(_JsonTupleCoder):
    def __init__(self):
        super().__init__(Interaction)


class DeadLetterCoder(_JsonTupleCoder):
    def __init__(self):
        super().__init__(DeadLetter)


class InteractionWarningCoder(_JsonTupleCoder):
    def __init__(self):
        super().__init__(InteractionWarning)


class QualityWarningCoder(_JsonTupleCoder):
    def __init__(self):
        super().__init__(QualityWarning)


beam.coders.registry.register_coder(Interaction, InteractionCoder)
beam.coders.registry.register_coder(DeadLetter, DeadLetterCoder)
beam.coders.registry.register_coder(QualityWarning, QualityWarningCoder)
beam.coders.registry.register_coder(InteractionWarning, InteractionWarningCoder)
