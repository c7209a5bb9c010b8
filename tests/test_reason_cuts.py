"""A long dead-letter reason is cut for results.json and the console (:func:`fair_forge_beam.reasons.cut_reason`)
without saying what it does not (trial40 J6): the middle cut of ``the answer: is not valid JSON (…)`` read
``the answer: is … valid JSON (…)``, and ``extra_key: is not a field of this object (…)`` read ``extra_key: is …
object (…)``. The reasons the package writes are taken from its own word tables (:mod:`fair_forge_beam.plain`)."""
from __future__ import annotations

import re

from hypothesis import example, given, settings, strategies as st

from fair_forge_beam import plain
from fair_forge_beam.reasons import NEGATION, REASON_LIMIT, cut_reason

JUDGE = "judge: invalid answer after 2 attempt(s): answer does not match the verdict schema: "


def test_the_trial_s_reasons_keep_their_negation():
    for said, whole in [("the answer", "is not valid JSON (recursion limit exceeded at line 1 column 239)"),
                        ("extra_key", plain._FIXED_WORDS["extra_forbidden"])]:
        reason = f"{JUDGE}{said}: {whole}"
        assert len(reason) > REASON_LIMIT
        cut = cut_reason(reason)
        assert len(cut) <= REASON_LIMIT and whole.split(" (")[0] in cut, cut


#: the package's validation phrases that hold a negation (each a clause a cut may show in part)
NEGATED = sorted({w for w in plain._FIXED_WORDS.values() if NEGATION.search(w)}
                 | {"is not valid JSON", "is not text of its encoding", "could not be read", "cannot read the file",
                    "is not a regular file; not read", "no JSON object found in the answer"})
WORD = st.text("abcdefghijklmnopqrstuvwxyz_.0123456789", min_size=1, max_size=12)


@settings(max_examples=400, deadline=None)
@example(prefix="", location="0.0.0.00.000000.0000000000.000000000000.000000000000",  # session 31's full run
         phrase="could not be filled in because of the errors before it", detail="0 000 000000000000",
         after="0 0 0000 00000000 000000000000")
@given(prefix=st.sampled_from(["", JUDGE, "judge call failed: HTTP 500: ", "cannot read compressed file raw.jsonl.gz: "]),
       location=st.lists(WORD, min_size=0, max_size=20).map(".".join),
       phrase=st.sampled_from(NEGATED),
       detail=st.lists(WORD, min_size=0, max_size=25).map(" ".join),
       after=st.lists(WORD, min_size=0, max_size=12).map(" ".join))
def test_a_cut_reason_keeps_a_negation_and_whole_words(prefix, location, phrase, detail, after):
    reason = f"{prefix}{location or 'the answer'}: {phrase}" + (f" ({detail})" if detail else "") + \
        (f"; {after}" if after else "")
    cut = cut_reason(reason)
    assert len(cut) <= REASON_LIMIT
    if len(reason) <= REASON_LIMIT:
        assert cut == reason
        return
    parts = cut.split(" … ")
    assert reason.startswith(parts[0]) and reason.endswith(parts[-1]), cut
    assert all(p in reason for p in parts), cut
    assert NEGATION.search(cut), (reason, cut)  # the reason says "not"; so does its cut
    # a piece shown after " … " that starts inside a clause never drops that clause's negation: the
    # trial's "is … valid JSON" read as the opposite of "is not valid JSON"
    pos = len(reason) - len(parts[-1])
    shown_until = len(parts[0])
    for piece in parts[1:-1]:
        pos_mid = reason.index(piece, shown_until)
        assert _dropped_negation(reason, pos_mid, piece, shown_until) is None, (reason, cut)
        shown_until = pos_mid + len(piece)
    assert _dropped_negation(reason, pos, parts[-1], shown_until) is None, (reason, cut)


def test_the_negation_check_sees_only_what_the_cut_left_out():
    """The check above: a clause's negation left out between two pieces is a dropped negation (the trial's "is …
    valid JSON"); one shown in the piece before the gap is not (the full run of session 31 found "X: could not be
    filled in because of the … before it (…)" reported as dropping the "not" it shows)."""
    reason = "the answer: is not valid JSON (line 1)"
    assert _dropped_negation(reason, reason.index("valid"), "valid JSON (line 1)", len("the answer: is")) == "not"
    reason = "x: could not be filled in because of the errors before it (0 000); 0 0"
    head = "x: could not be filled in because of the"
    assert _dropped_negation(reason, reason.index("before it"), "before it (0 000); 0 0", len(head)) is None


def _dropped_negation(reason: str, pos: int, piece: str, shown_until: int = 0):
    """The negation of the clause that ``piece`` (shown from ``pos``) starts in, left out before it: in the text
    between the clause's start (or the end of what the cut shows before, ``shown_until``) and ``pos``."""
    start = max(reason.rfind(sep, 0, pos + 1) + len(sep) if reason.rfind(sep, 0, pos + 1) != -1 else 0
                for sep in (": ", "; ", ", ", " ("))
    dropped = reason[max(start, shown_until):pos]
    if NEGATION.match(piece):
        return None
    m = NEGATION.search(dropped)
    return m.group(0) if m else None


def test_a_cut_keeps_the_reasons_first_item_whole():
    """The end's whole last clauses (fix42d) had left the start "…: queries:", dropping the main cause
    "is required but missing" (test_cli_edges' loop whose generator fails every call)."""
    kind = ("invalid answer after 2 attempt(s): the generator's reply: queries: is required but missing; "
            "insight: is not a field of this object (an unknown key: leave it out or check its spelling)")
    cut = cut_reason(kind)
    assert len(cut) <= REASON_LIMIT and cut.startswith(kind[:kind.index("; ")] + " … "), cut
    assert cut.endswith("(an unknown key: leave it out or check its spelling)"), cut
