"""The main job's console summary: one header, per metric the scored / not-scored counts, the
dead letters and a table of slice estimates (the ``headline_columns`` each metric declares).

Input is the content of ``results.json`` (:mod:`fair_forge_beam.reports.results`); nothing here
reads records. Slice labels come from the data, so every printed line is passed through
:func:`printable` (no forged lines, no terminal escapes).
"""
from __future__ import annotations

from typing import Optional, Sequence

from fair_forge_beam.reports.estimates import sessions_of
from fair_forge_beam.reports.layout import OUTPUT_FILES
from fair_forge_beam.schemas.metric_info import dotted_get
from fair_forge_beam.quoting import fixed_estimate, length_note, shown_key

__all__ = ["summary_table", "metric_summary_lines", "format_estimate", "printable"]


def format_estimate(est: Optional[dict]) -> str:
    """``"mean [ci_low, ci_high]"`` with 4 decimals, ``"mean"`` without an interval, ``"n/a"``
    for a missing estimate or mean."""
    return fixed_estimate(est)


def left_out_what(name: str) -> str:
    """What the sessions metric ``name``'s ``MetricSpec.scored`` test leaves out are, in its own
    words (:attr:`~fair_forge_beam.schemas.metric_info.MetricInfo.left_out`; the summary's
    ``interactions_left_out``), or "sessions its estimates leave out" (a metric that words nothing,
    or one this version does not know)."""
    try:
        from fair_forge_beam.metrics.registry import metric_info

        what = metric_info(name).left_out
    except Exception:  # noqa: BLE001 - a results.json of a metric this version does not know: the default
        what = None
    return what or "sessions its estimates leave out"


def metric_summary_lines(name: str, ms: dict, n_read: int, overall: Optional[dict] = None) -> list[str]:
    """The summary lines of one metric, one unit per line, each unit named: interactions
    (scored / not scored of those read, and how many of those not scored were in sessions its
    estimates leave out: BestOf's walkovers), then dead letters (with what one dead letter stands
    for, e.g. one per interaction and attribute for Bias, one per failed match for BestOf), then
    those of its other stages (``stage_dead_letters``: PromptEvaluator's failed JQ judgements), each
    in its unit; and a warning for a part that scored nothing — a stage that wrote dead letters
    and feeds an estimate (``DeadLetterStage.feeds``) that the ``overall`` slice record has no
    value of (a requested JQ whose every judgement failed)."""
    scored = ms.get("interactions_scored", ms.get("scored", 0))
    not_scored = ms.get("interactions_not_scored", max(n_read - scored, 0))
    left_out = ms.get("interactions_left_out") or 0  # in sessions its estimates leave out (MetricSpec.scored)
    lines = [f"{name}: interactions: {scored} scored, {not_scored} not scored (of {n_read} read"
             + (f"; {left_out} of them in {left_out_what(name)})" if left_out else ")")]
    dead = ms.get("dead_letters", ms.get("not_scored", 0))
    reasons = ms.get("dead_letter_reasons", ms.get("not_scored_reasons")) or {}
    if dead:
        why = "; ".join(f"{r}: {c}" for r, c in reasons.items())
        unit = ms.get("dead_letter_unit") or "dead-lettered records"
        lines.append(f"  dead letters: {dead} {unit}" + (f" ({why})" if why else ""))
    for stage, part in (ms.get("stage_dead_letters") or {}).items():
        if not isinstance(part, dict) or not part.get("dead_letters"):
            continue
        why = "; ".join(f"{r}: {c}" for r, c in (part.get("dead_letter_reasons") or {}).items())
        lines.append(f"  dead letters of stage {stage}: {part['dead_letters']} {part.get('dead_letter_unit') or 'dead-lettered records'}"
                     + (f" ({why})" if why else ""))
        empty = _part_scored_nothing(name, stage, overall)
        if empty is not None:
            lines.append(f"  warning: {empty[0]} was asked for and scored nothing (its {part['dead_letters']} dead letters "
                         f"above): {empty[1]} is n/a in every slice; the other estimates stand")
    return lines


def _part_scored_nothing(name: str, stage: str, overall: Optional[dict]) -> Optional[tuple]:
    """``(part, estimate path)`` when ``stage`` of metric ``name`` feeds an estimate
    (:class:`~fair_forge_beam.schemas.metric_info.DeadLetterStage`) that the ``overall`` slice
    record holds no value of (null, or ``n`` 0), else ``None``."""
    from fair_forge_beam.reports.results import stage_owner

    if not isinstance(overall, dict):
        return None
    _, part = stage_owner(stage, [name])
    if part is None or not part.feeds:
        return None
    est = dotted_get(overall, part.feeds)
    if isinstance(est, dict) and est.get("mean") is not None and est.get("n") != 0:
        return None
    return part.part or stage, part.feeds


#: a metric with at most this many slices prints them all; above, the overall slice and the extremes
MAX_CONSOLE_SLICES = 20
#: slices printed at each end of every headline estimate (highest and lowest) above MAX_CONSOLE_SLICES
CONSOLE_EXTREMES = 3


def _extremes(name: str, slices: list, heads: Sequence[str], n: int) -> list[tuple[str, dict]]:
    """``[(why, slice record)]``: per headline estimate, the ``n`` slices with the highest and the
    ``n`` with the lowest mean (worst first when the estimate has a better side), among the slices
    with a value and at least ``MIN_COMPARE_SESSIONS`` sessions (the one-session rule); ties by key."""
    from fair_forge_beam.reports.estimates import direction, estimate_info, is_undefined
    from fair_forge_beam.statistical.slices import MIN_COMPARE_SESSIONS

    out = []
    for h in heads:
        valued = [r for r in slices if r["slice"] != "overall" and not is_undefined(name, h, dotted_get(r, h))
                  and not (isinstance(sessions_of(name, r), int) and sessions_of(name, r) < MIN_COMPARE_SESSIONS)]
        valued.sort(key=lambda r: (-dotted_get(r, h)["mean"], r["slice"]))
        info, key = estimate_info(name, h)
        label, sign = (info.label_for(key) if info is not None else h), direction(name, h)
        if len(valued) <= 2 * n:  # too few for two lists: each once (trial33 T10: the same rows were worst and best)
            rows = sorted(valued, key=lambda r: (dotted_get(r, h)["mean"], r["slice"])) if sign > 0 else valued
            out.extend((f"{label}, {'worst' if sign else 'highest'} first", r) for r in rows)
            continue
        ends = [("highest", valued[:n]), ("lowest", sorted(valued[::-1][:n], key=lambda r: (dotted_get(r, h)["mean"], r["slice"])))]
        if sign > 0:  # higher is better: the lowest are the worst, shown first
            ends.reverse()
        for end, rows in ends:
            tag = {("highest", -1): " (worst)", ("lowest", 1): " (worst)", ("highest", 1): " (best)",
                   ("lowest", -1): " (best)"}.get((end, sign), "")
            out.extend((f"{end} {label}{tag}", r) for r in rows)
    return out


#: unscored assistants named in report.html's findings (the console names :data:`CONSOLE_UNSCORED_NAMES`)
REPORT_UNSCORED_NAMES = 20


def unscored_assistants(doc: dict, dead_letters: Optional[dict]) -> list[dict]:
    """The assistants no metric scored at all: they have dead letters
    (:func:`~fair_forge_beam.reports.load.dead_letter_summary`'s ``by_assistant``) and no
    interaction scored by any metric (its ``interactions_scored``, from the run's session
    records: trial36 T2, a run sliced by ``language`` only named every assistant "not scored at
    all"). A summary without those counts (older runs) is judged by the ``assistant_id=…``
    slices, and only when the run sliced by ``assistant_id``; otherwise nobody is named (never a
    guess). ``[{assistant, dead_letters, reason, interactions, what}]`` (the most frequent
    reason), sorted by name; the findings name them (issue 28: the shipped examples'
    Spanish-only assistants were invisible).

    ``what`` counts in the units the rest of the page uses (issue 28, fresh-user trial: "32 dead
    letters" for 16 interactions, one dead letter per interaction and metric, where the summary
    and each metric's "Interactions: N scored, M not scored" count interactions): the
    interactions each metric could not score, with the metrics named (``interactions``: the
    largest such count, or ``None``); stages whose dead letters stand for something else (records
    rejected at read, a metric's own :func:`~.results.dead_letter_unit`) in their own unit."""
    from fair_forge_beam.slices import SLICE_DIMENSIONS

    by = (dead_letters or {}).get("by_assistant") or {}
    sliced = "assistant_id" in ((doc.get("config") or {}).get("slices") or SLICE_DIMENSIONS)
    seen = {str(r.get("slice"))[len("assistant_id="):] for m in doc.get("metrics", {}).values()
            for r in m.get("slices") or [] if str(r.get("slice", "")).startswith("assistant_id=")}

    def unscored(a: str, v: dict) -> bool:
        if "interactions_scored" in v:
            return not v["interactions_scored"]
        return sliced and a not in seen

    return [{"assistant": a, "dead_letters": v["count"], "reason": v["reason"], **_unscored_counts(v)}
            for a, v in sorted(by.items()) if unscored(a, v)]


def unscored_words(unscored: list, cap: int) -> tuple[str, str]:
    """``(head, names)``: the words that name the assistants nobody scored (:func:`unscored_assistants`),
    the same in report.html's findings and on the console (trial30 T8): ``"Not scored at all (2
    assistants: every interaction is a dead letter):"`` and ``"support-bot (16 interactions not
    scored by …; most often: …); sushi_bot (…)."``, the first ``cap`` by name, ``"and N more"``
    counting the rest."""
    from fair_forge_beam.quoting import shown

    n = len(unscored)
    head = f"Not scored at all ({n:,} assistant{'s' if n != 1 else ''}: every interaction is a dead letter):"
    names = "; ".join(f"{shown(u['assistant'])} ({u['what']}; most often: {u['reason']})" for u in unscored[:cap])
    return head, names + (f" and {n - cap:,} more." if n > cap else ".")


def _unscored_counts(entry: dict) -> dict:
    """``{"interactions", "what"}`` of one unscored assistant's dead letters (see
    :func:`unscored_assistants`); an entry without ``by_stage`` (older summaries) says its dead
    letters."""
    from fair_forge_beam.reports.results import _DEFAULT_UNIT, dead_letter_unit

    stages = entry.get("by_stage")
    if not stages:
        n = entry["count"]
        return {"interactions": None, "what": f"{n} dead letter{'s' if n != 1 else ''}"}
    from fair_forge_beam.io.failed_turns import RUNNER_STAGE

    per_interaction = {s: n for s, n in stages.items() if s not in ("read", RUNNER_STAGE) and dead_letter_unit(s) == _DEFAULT_UNIT}
    parts = []
    if per_interaction:
        counts = set(per_interaction.values())
        names = sorted(per_interaction)
        if len(counts) == 1:
            n = counts.pop()
            parts.append(f"{n} interaction{'s' if n != 1 else ''} not scored by "
                         + (" or ".join(names) if len(names) <= 2 else ", ".join(names[:-1]) + " or " + names[-1]))
        else:
            parts.append("interactions not scored: " + ", ".join(f"{s} {per_interaction[s]}" for s in names))
    for s, n in sorted(stages.items()):
        if s in per_interaction:
            continue
        if s == "read":
            parts.append(f"{n} record{'s' if n != 1 else ''} rejected at read")
        elif s == RUNNER_STAGE:
            parts.append(f"{n} turn{'s' if n != 1 else ''} the assistant failed to answer")
        else:
            parts.append(f"{s}: {n} {dead_letter_unit(s)}")
    return {"interactions": max(per_interaction.values()) if per_interaction else None, "what": "; ".join(parts)}


#: unscored assistants named on the console (the rest counted; report.html names more)
CONSOLE_UNSCORED_NAMES = 10


def console_summary(doc: dict, out: str, files: Sequence[str], gates=None, what: str = "audit",
                    dead_letters: Optional[dict] = None) -> str:
    """:func:`summary_table` as a command prints it (an audit, a roll-up): composed of the masked
    document's values (:func:`~fair_forge_beam.io.secrets.scrub_known`), then the text masked with
    the run's key values, every name of the document and text of ``gates`` kept (issue 28: never a
    field, slice or metric name nor our own words; trial B7). ``dead_letters``: the run's
    :func:`~fair_forge_beam.reports.load.dead_letter_summary`, for the line naming the assistants
    nobody scored (the report's words, :func:`unscored_words`)."""
    from fair_forge_beam.io.secrets import gate_texts, name_texts, scrub_known, scrub_known_text

    text = summary_table(scrub_known(doc), out, files, what)
    if dead_letters:
        unscored = unscored_assistants(doc, scrub_known(dead_letters))
        if unscored:
            head, names = unscored_words(unscored, CONSOLE_UNSCORED_NAMES)
            body, outputs = text.rsplit("\n", 1)
            where = f"{out}/report.html and {out}/dead_letter/" if "report.html" in files else f"{out}/dead_letter/"
            text = "\n".join((body, printable(f"{head} {names} Every one in {where}."), outputs))
    return scrub_known_text(text, name_texts(doc) | gate_texts(gates))


def summary_table(doc: dict, out: str, files: Sequence[str] = OUTPUT_FILES[:6], what: str = "audit") -> str:
    """The printed summary of a run from its ``results.json`` content ``doc``; ``files`` are the
    outputs listed under ``out`` on the last line; ``what`` names the run in the first line
    (``"audit"``, ``"roll-up"``).

    A metric with at most :data:`MAX_CONSOLE_SLICES` slices prints every slice; a metric with more
    prints the overall slice, then per headline estimate the :data:`CONSOLE_EXTREMES` slices with
    the highest and the lowest value (judged slices only: at least two sessions), and one line
    saying how many slices are not printed and where the full table is. The number of lines is
    bounded whatever the number of assistants, and their width whatever the labels' length (a
    label over :data:`CONSOLE_LABEL_WIDTH` columns is elided: :func:`console_label`)."""
    from fair_forge_beam.reports.estimates import is_undefined
    from fair_forge_beam.statistical.slices import MIN_COMPARE_SESSIONS as MIN_SESSIONS  # the one-session rule, as the report
    from fair_forge_beam.statistical.slices import NO_OBSERVATION_NOTE, ONE_OBSERVATION_NOTE, ONE_SESSION_NOTE, one_session_note

    def cell(name, h, est):
        if is_undefined(name, h, est):
            return "n/a"
        note = one_session_note(est)
        if note is not None:  # marked as the report and the gates mark it
            return f"{'n/a' if note == NO_OBSERVATION_NOTE else format_estimate(est)} ({note.split(':', 1)[0]})"
        return format_estimate(est)

    s = doc["summary"]
    lines = [
        f"fair_forge_beam {what}: mode {doc['config']['mode']}"
        + (f", seed {doc['config']['seed']}, {doc['config']['mc_samples']} draws" if doc["config"]["mode"] == "bayesian" else ""),
        f"records: {s['interactions_read']} interactions read, {s['rejected_at_read']} rejected at read, "
        f"{s['data_quality_warnings']} data-quality warnings",
    ]
    if s.get("rejected_at_read"):  # why, as each metric's dead letters say (trial33 T2: the count alone)
        lines.append(f"  rejected at read: {s['rejected_at_read']} record{'s' if s['rejected_at_read'] != 1 else ''}"
                     f"{_top_reasons(s.get('rejected_at_read_reasons'))}; each in {out}/dead_letter/")
    if s.get("assistant_failed"):  # turns the runner failed to answer: read, scored by no metric (trial40 J3)
        n = s["assistant_failed"]
        lines.append(f"  the assistant failed {n} of the {s['interactions_read']} turns read: scored by no metric"
                     f"{_top_reasons(s.get('assistant_failed_reasons'))}; each in {out}/dead_letter/")
    for stage, other in (s.get("other_dead_letters") or {}).items():  # a stage no metric of the run claims
        if isinstance(other, dict) and other.get("dead_letters"):
            lines.append(f"  dead letters of stage {stage}: {other['dead_letters']}"
                         f"{_top_reasons(other.get('dead_letter_reasons'))}; each in {out}/dead_letter/")
    if not s["interactions_read"]:
        lines.append("warning: no interaction was read from the inputs (empty files, or every record rejected: "
                     "see dead_letter/); the metrics below have nothing to report")
    for name, m in doc["metrics"].items():
        heads = m.get("headline_columns", [])
        slices = m["slices"]
        lines.extend(metric_summary_lines(name, s["metrics"][name], s["interactions_read"],
                                          next((r for r in slices if r.get("slice") == "overall"), None)))
        if len(slices) <= MAX_CONSOLE_SLICES:
            shown = [(None, r) for r in slices]
        else:
            shown = [(None, r) for r in slices if r["slice"] == "overall"] + _extremes(name, slices, heads, CONSOLE_EXTREMES)
        width = max([display_width(console_label(shown_key(r["slice"]))) for _, r in shown] + [10])  # what is printed
        # a metric whose estimates leave sessions out (MetricSpec.scored): a slice's n counts every
        # interaction of its sessions the metric read, those too (trial35b B9: 'overall  60' under
        # '12 scored'); the engine counts scored sessions per slice, not their interactions: say so
        left_out = int((s["metrics"][name] or {}).get("interactions_left_out") or 0)
        lines.append(
            "  " + "slice".ljust(width) + "  " + ("n read" if left_out else "n").rjust(7) + "  " + "sessions".rjust(8) + "".join(f"  {h.rsplit('.', 1)[-1]:<34}" for h in heads)
        )
        starred = one_obs = one_ses = False
        observed = _observed_units(name, heads)
        one_units: set = set()
        prior_only = False
        no_value: set = set()  # headline columns shown "n/a" (no value), said under the table
        last_why = None
        for why, r in shown:
            if why is not None and why != last_why:
                lines.append(f"  {why}:")
            last_why = why
            texts = [cell(name, h, dotted_get(r, h)) for h in heads]
            no_value |= {h for h, t in zip(heads, texts) if t == "n/a"}
            one_units |= {observed[h] for h, t in zip(heads, texts) if t.endswith("(1 observation)")}
            one_obs = bool(one_units)
            one_ses |= any(t.endswith(f"({ONE_SESSION_NOTE.split(':', 1)[0]})") for t in texts)
            prior_only |= any(t.endswith(f"({NO_OBSERVATION_NOTE.split(':', 1)[0]})") for t in texts)
            vals = "".join(f"  {t:<34}" for t in texts)
            n_ses = sessions_of(name, r)  # the metric's resampling units (BestOf: blocks)
            small = isinstance(n_ses, int) and n_ses < MIN_SESSIONS  # the overall slice too: one rule, every row
            starred |= small
            lines.append(
                "  " + pad(console_label(shown_key(r["slice"])), width) + "  " + str(r["n_interactions"]).rjust(7) + "  "
                + (f"{n_ses}*" if small else str("" if n_ses is None else n_ses)).rjust(8) + vals
            )
        if left_out:
            lines.append(f"  n read: the interactions of the slice's sessions {name} read, with those in "
                         f"{left_out_what(name)} ({left_out} in the run), which its estimates leave out; "
                         "sessions: those the estimates rest on")
        if starred:
            lines.append(f"  * fewer than {MIN_SESSIONS} sessions: too small to judge (sessions are the resampling unit,"
                         " so one session gives no interval: the report lists these slices apart)")
        if one_obs:
            units = " or ".join(f"one {u}" for u in sorted(one_units))  # the metric's unit: a pass@k rests on tasks
            lines.append(f"  (1 observation): the estimate rests on one observation, so on {units}: "
                         f"{ONE_OBSERVATION_NOTE.split(': ', 1)[1]} (the report marks it so; a gate on its interval fails)")
        if one_ses:
            lines.append(f"  ({ONE_SESSION_NOTE.split(':', 1)[0]}): the estimate rests on the evidence of one session of "
                         f"its slice: {ONE_SESSION_NOTE.split(': ', 1)[1]}, too small to judge (the report marks it so)")
        lines.extend(_no_value_lines(name, [h for h in heads if h in no_value]))
        if prior_only:
            lines.append(f"  ({NO_OBSERVATION_NOTE.split(':', 1)[0]}): the estimate rests on "
                         f"{NO_OBSERVATION_NOTE.split(': ', 1)[1]} (n = 0), so its value would be its prior's: "
                         "undefined (the report marks it so; no gate passes on it, no difference is claimed from it)")
        if len(slices) > MAX_CONSOLE_SLICES:
            small_n = sum(1 for r in slices if isinstance(sessions_of(name, r), int) and sessions_of(name, r) < MIN_SESSIONS)
            lines.append(f"  {len(slices)} slices ({small_n} too small to judge, fewer than {MIN_SESSIONS} sessions): "
                         f"the {len({r['slice'] for _, r in shown})} above; every slice in {out}/results.json "
                         f"(load_results()), the whole records in {out}/slices/{name}/, the report's filterable table")
    lines.append("outputs: " + ", ".join(f"{out}/{n}" for n in files))
    return "\n".join(printable(ln) for ln in lines)


def _no_value_lines(metric: str, heads: list) -> list:
    """One line per reason the ``heads`` shown "n/a" have no value: the reason each estimate's info
    declares (:attr:`~fair_forge_beam.schemas.metric_info.EstimateInfo.undefined`), columns sharing
    a reason on one line."""
    from fair_forge_beam.reports.estimates import estimate_info
    from fair_forge_beam.schemas.metric_info import NO_VALUE

    by_reason: dict = {}
    for h in heads:
        info, _ = estimate_info(metric, h)
        by_reason.setdefault((info.undefined if info is not None else None) or NO_VALUE, []).append(h.rsplit(".", 1)[-1])
    return [f"  n/a ({', '.join(hs)}): {why}" for why, hs in by_reason.items()]


#: reasons of the records rejected at read named on the console (the others are counted)
CONSOLE_READ_REASONS = 3


def _top_reasons(reasons: Optional[dict]) -> str:
    """`` (reason: count; …; and N more reasons)`` of ``results.json``'s ranked
    ``rejected_at_read_reasons`` (most frequent first), or ``""`` without any."""
    items = list((reasons or {}).items())
    if not items:
        return ""
    shown = "; ".join(f"{r}: {c}" for r, c in items[:CONSOLE_READ_REASONS])
    more = len(items) - CONSOLE_READ_REASONS
    return f" ({shown}{f'; and {more} more reason' + ('s' if more != 1 else '') if more > 0 else ''})"


def _observed_units(name: str, heads) -> dict:
    """Per headline column of metric ``name``, what one observation of it is
    (:attr:`~fair_forge_beam.schemas.metric_info.EstimateInfo.observed`; ``"session"`` when the
    metric or the column is unknown)."""
    try:
        from fair_forge_beam.metrics.registry import metric_info

        info = metric_info(name)
    except Exception:  # noqa: BLE001 - a results.json of a metric this version does not know: the default
        info = None
    out = {}
    for h in heads:
        spec = info.find(h)[0] if info is not None else None
        out[h] = getattr(spec, "observed", None) or "session"
    return out


def display_width(text: str) -> int:
    """The columns ``text`` takes on a terminal: a wide or full-width character (CJK, most emoji)
    two, a combining mark or a format character none, any other one (issue 28, trial 28e B5: a
    label's width was counted before :func:`printable` escaped it, and the table's rows were
    misaligned)."""
    import unicodedata

    return sum(0 if unicodedata.combining(c) or unicodedata.category(c) in ("Mn", "Me", "Cf")
               else 2 if unicodedata.east_asian_width(c) in ("W", "F") else 1 for c in text)


#: the console table's slice column is at most this wide (trial36 T11: a 200-character value made
#: every row, ``overall`` included, ~300 columns wide); the full label is in the output files
CONSOLE_LABEL_WIDTH = 40
#: columns of a long label's end kept by :func:`console_label` (a cut value's hash: ``…52d7adc8``)
_LABEL_TAIL = 12


def console_label(text: str, width: int = CONSOLE_LABEL_WIDTH) -> str:
    """``text`` (a slice label as shown) within :func:`display_width` ``width``: a longer one keeps
    its start and its last :data:`_LABEL_TAIL` columns around ``…`` (the end of a value cut with its
    hash stays, so two long values that share their start stay apart); a value :func:`shown` cut
    already keeps its whole length note (``assistant_id=AAA… (1,000,000 characters)``: the length
    was cut to `` characters)`` before, the full suite's test_long_values)."""
    if display_width(text) <= width:
        return text
    note = length_note(text)  # a value cut already (quoting.shown): its "… (N characters)" stays whole
    if note:
        text, tail = text[:-len(note)], note[1:]
    else:
        tail = ""
        for c in reversed(text):
            if display_width(c + tail) > _LABEL_TAIL:
                break
            tail = c + tail
    head, room = "", width - 1 - display_width(tail)
    for c in text:
        if display_width(head + c) > room:
            break
        head += c
    return head + "…" + tail


def pad(text: str, width: int) -> str:
    """``text`` and spaces to :func:`display_width` ``width``."""
    return text + " " * max(0, width - display_width(text))


def printable(text: str) -> str:
    """``text`` with every non-printable character (newline, carriage return, ANSI escape, bidi
    override, ...) written as its Python escape: slice labels come from the data, and a record must
    not be able to forge a summary line or drive the terminal."""
    return text if text.isprintable() else "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                                                   for c in text)
