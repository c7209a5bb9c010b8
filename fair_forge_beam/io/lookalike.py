"""Ids that look alike: values of an id or slice dimension (``session_id``, ``assistant_id``,
``language``, each metadata slice field) that are one text after Unicode NFKC normalisation but
differ as written — ``bot-café`` with a precomposed ``é`` (NFC, as Linux and Windows write it) and
with ``e`` + U+0301 (NFD, as macOS file names give it), or ``bot-K`` and the fullwidth
``bot-Ｋ``. They stay two sessions, assistants or slices (the data says two; merging them would be
a guess); one data-quality warning per group names each spelling with its code points, and every
label shows the characters that NFKC would change as escapes (:func:`fair_forge_beam.quoting.shown`:
``bot-cafe\\u0301``), so the two rows no longer look the same (trial39 T7).

Cost: a value is looked at once per interaction and dimension; ASCII text is NFKC-stable and
costs one ``str.isascii``. Only values that NFKC changes, and the stable values they become, go
through a shuffle — one element per distinct spelling.
"""
from __future__ import annotations

import unicodedata
import typing
from typing import Iterable, Optional

from fair_forge_beam._beam import beam
from fair_forge_beam.io.elements import QualityWarning
from fair_forge_beam.quoting import shown

__all__ = ["LookAlikeIds", "lookalike_message", "code_points", "MAX_SPELLINGS"]

#: spellings of one normalised value named in a warning (more are counted)
MAX_SPELLINGS = 5


def _stable(text: str) -> bool:
    return text.isascii() or unicodedata.is_normalized("NFKC", text)


def _ids(x) -> Iterable[tuple]:
    """``(dimension, value)`` of an interaction's ids and slice values (texts only)."""
    yield "session_id", x.session_id
    yield "assistant_id", x.assistant_id
    yield "language", x.language
    for field, value in x.slice_values or ():
        if isinstance(value, str):
            yield field, value


def code_points(text: str, limit: int = 12) -> str:
    """The code points of ``text``'s characters that are not ASCII, with their positions
    (``U+0301 at 8``), at most ``limit`` of them; ``"ASCII only"`` when there is none."""
    found = [f"U+{ord(c):04X} at {i}" for i, c in enumerate(text) if not c.isascii()]
    if not found:
        return "ASCII only"
    return ", ".join(found[:limit]) + (f" and {len(found) - limit} more" if len(found) > limit else "")


def lookalike_message(dimension: str, spellings: list, n: int) -> str:
    """The warning's text for ``spellings`` (sorted) of one NFKC value of ``dimension`` (``n`` in all)."""
    named = "; ".join(f"'{shown(s)}' ({code_points(s)})" for s in spellings)
    more = f" and {n - len(spellings)} more" if n > len(spellings) else ""
    return (f"{dimension}: {n} spellings are one text after Unicode NFKC normalisation but differ as written: "
            f"{named}{more}; they are kept apart (two slices or sessions that look alike, each label shows the "
            "differing characters escaped): write the ids one way (e.g. NFC) if they mean the same")


@beam.typehints.with_output_types(typing.Union[typing.Tuple[str, typing.Any], typing.Tuple[typing.Any, typing.Any]])
class _IdValues(beam.DoFn):
    """An interaction → each of its ``(dimension, value)`` ids (:func:`_ids`), each pair once per
    bundle: what crosses to :class:`_Spellings` (a step with a side input made from the same
    interactions runs in a stage of its own, so its input is written and read again), never the
    interactions themselves."""

    def start_bundle(self):
        self._seen: set = set()

    def process(self, x):
        seen = self._seen
        for pair in _ids(x):
            if pair not in seen:
                if len(seen) >= 100_000:  # a bound on a worker's memory: a pair sent twice is merged by the combine
                    seen.clear()
                seen.add(pair)
                yield pair


class _Spellings(beam.DoFn):
    """An id ``(dimension, value)`` → ``((dimension, NFKC value), value)`` when NFKC changes it or
    it is a stable value such an id becomes (``forms``: the side input of those NFKC values)."""

    def __init__(self):
        self._forms: Optional[frozenset] = None

    def start_bundle(self):
        self._forms = None

    def process(self, pair, forms):
        if self._forms is None:  # the side input is one list for the whole (global-window) input
            self._forms = frozenset(forms)
        dim, value = pair
        if _stable(value):
            if pair in self._forms:
                yield pair, value
        else:
            yield (dim, unicodedata.normalize("NFKC", value)), value


@beam.typehints.with_output_types(typing.Tuple[typing.Any, typing.Any])
class _Forms(beam.DoFn):
    """An id ``(dimension, value)`` → ``(dimension, NFKC value)`` when NFKC changes it."""

    def process(self, pair):
        dim, value = pair
        if not _stable(value):
            yield dim, unicodedata.normalize("NFKC", value)


class _FewSpellings(beam.CombineFn):
    """The distinct spellings of one key: the first :data:`MAX_SPELLINGS` (sorted) and how many."""

    def create_accumulator(self):
        return set()

    def add_input(self, acc, value):
        acc.add(value)
        return acc

    def merge_accumulators(self, accs):
        out: set = set()
        for a in accs:
            out |= a
        return out

    def extract_output(self, acc):
        return sorted(acc)


def _warning(kv):
    (dim, form), spellings = kv
    if len(spellings) > 1:
        yield QualityWarning("lookalike_ids", f"{dim}={form}",
                             lookalike_message(dim, spellings[:MAX_SPELLINGS], len(spellings)))


class LookAlikeIds(beam.PTransform):
    """Bounded interactions → one ``lookalike_ids`` :class:`~fair_forge_beam.io.elements.QualityWarning`
    per id or slice value that two or more spellings share after NFKC (key ``dimension=NFKC value``)."""

    def __init__(self, label: str = ""):
        super().__init__()
        self.label = label

    def expand(self, interactions):
        lab = self.label
        ids = interactions | f"{lab}LookAlikeIdValues" >> beam.ParDo(_IdValues())
        forms = (ids
                 | f"{lab}LookAlikeForms" >> beam.ParDo(_Forms())
                 | f"{lab}LookAlikeFormsOnce" >> beam.Distinct())
        return (ids
                | f"{lab}LookAlikeSpellings" >> beam.ParDo(_Spellings(), beam.pvalue.AsList(forms))
                | f"{lab}LookAlikeGroup" >> beam.CombinePerKey(_FewSpellings())
                | f"{lab}LookAlikeWarnings" >> beam.FlatMap(_warning).with_output_types(QualityWarning))
