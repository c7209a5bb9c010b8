"""BestOf: which assistant answered the same questions best? (spec §6.6, plus a ranking).

A **block** is the set of answers that several assistants gave to the same questions:

* ``block="session"`` (default): all interactions sharing a ``session_id``, one contestant per
  ``assistant_id`` with its whole conversation (turns in ``turn_index`` order) — upstream's
  dataset-level block, but keyed by ``session_id`` (upstream keyed by the tuple of ``qa_id``s
  only, which merges unrelated sessions that reuse ids such as ``q1``);
* ``block="qa"``: one block per ``(session_id, qa_id)`` — one question at a time (upstream's
  ``stream_batches`` behaviour).

Contestant order is deterministic: the declared ``contestant_order`` first (ids absent from a
block are skipped), then every other id sorted — never arrival order (spec §17 item 27, §18.3).

Modes (the judge decides every match; its answer is validated against
:class:`~fair_forge_beam.schemas.best_of.BestOfJudgeOutput`):

* ``"king"`` — king of the hill, as upstream: the first contestant is king; each next one
  challenges the king (shown as A = king, B = challenger); a challenger that wins becomes king;
  a tie keeps the king. N contestants → N − 1 matches. The block's winner is the king after the
  last match — also after a tied last match (upstream reported ``"tie"``, spec §17 item 4).
  A match depends on the previous one, so the matches of a block run **one after another**
  inside one ``DoFn`` call (``_KingOfTheHill``, which calls the judge handler directly, with
  its cache, client retries and Beam's retry/throttling wrapper); different blocks run in
  parallel on all workers.
* ``"all_pairs"`` — every pair of a block is judged once (N(N − 1)/2 matches, A = the earlier
  contestant). The matches are independent, so they are ``JudgeRequest`` elements that go
  through :class:`~fair_forge_beam.components.judge.RunJudge` (``RunInference``: batched,
  concurrent, cached, throttled) in parallel, and are joined back to their block by key. The
  block's winner is the contestant with the most points (win 1, tie ½); a shared top score →
  status ``tied``, no winner.

Two contestants whose rendered answers are identical tie without a judge call (``judged``
False; hh-rlhf's chosen/rejected pairs share all turns but the last).

On the engine (:mod:`fair_forge_beam.engine`), a block is the session, keyed ``(block_id, "",
language)``: the scorer groups interactions into blocks; in king mode it judges them, one
:class:`BlockScore` per block; in all-pairs mode (the one judge scorer,
:class:`~fair_forge_beam.metrics.judged.JudgeScorer`) the block and its pairs' verdicts are parts
of the block's session, joined by the session reducer in the engine's session combine. The
engine routes each block's record, contest rows and slice unit. Per slice (``overall``, ``language=<name>``; the main job's ``assistant_id`` dimension is
ignored: a ranking per assistant makes no sense): the verdicts of all blocks (both modes) are
merged as pairwise win/loss/tie counts (:class:`PairwiseCountCombineFn`, the sufficient
statistics) and ranked by a **Bradley–Terry** fit, ties as half wins
(:mod:`fair_forge_beam.statistical.bradley_terry`): frequentist — MLE with Wald intervals
(none when the MLE does not exist, e.g. a contestant that never lost); Bayesian — Gaussian
prior ``N(0, prior_sd²)`` on the log-strengths, Laplace-approximation posterior, credible
intervals and ``P(best)`` / mean rank from MC draws seeded by slice.

Bad input: a block with one contestant gets a result with status ``walkover`` (winner without
a match) and a data-quality warning; contestants that answered different questions are judged
all the same, with a warning; a failed judgement (HTTP error after retries, an answer that never
validates) goes to the dead letter (stage ``"bestof"``) and is counted in ``n_failed``; in king
mode it stops the block (status ``failed``, no winner: no verdict is ever invented).
"""
from __future__ import annotations

import json
import typing
from typing import Any, Mapping, NamedTuple, Optional, Sequence, Union

import numpy as np

from fair_forge_beam._beam import beam
from fair_forge_beam.components.judge.arguments import inference_arguments
from fair_forge_beam.components.judge.prompts_bestof import bestof_messages, render_contestant
from fair_forge_beam.engine import (
    DEAD, QUALITY, GroupPerSession, MetricSpec, SessionPart, SessionReducer, SliceEstimator, session_key_text,
)
from fair_forge_beam.io.elements import QualityWarning, dead_letter
from fair_forge_beam.metrics.base import MetricResults, MetricTransform
from fair_forge_beam.metrics.judged import build_judge
from fair_forge_beam.quoting import quoted
from fair_forge_beam.schemas.metric_info import EstimateInfo, MetricInfo, ParquetColumns
from fair_forge_beam.schemas.best_of import (
    BestOfContestRecord,
    BestOfJudgeOutput,
    BestOfMetric,
    BestOfSliceMetric,
)
from fair_forge_beam.schemas.common import Estimate
from fair_forge_beam.statistical.base import StatisticalMode
from fair_forge_beam.statistical.combiners import AccumulatorOutput
from fair_forge_beam.statistical.slices import SINGLE_SESSION_NOTE, single_session, slice_estimate, slice_win_rate
from fair_forge_beam.statistical.bradley_terry import (
    STRENGTH_TIE_TOLERANCE,
    SliceStatsCombineFn,
    competition_ranks,
    counts_by_player,
    elo_scale,
    estimate_bradley_terry,
)
from fair_forge_beam.plain import plain_reason
from fair_forge_beam.arguments import checks_arguments

__all__ = ["BestOf", "Block", "BlockScore", "Contestant", "SliceStatsCombineFn", "BESTOF_MODES", "BLOCKS"]

BESTOF_MODES = ("king", "all_pairs")
BLOCKS = ("session", "qa")
BESTOF_SLICES = ("overall", "language")
#: why a slice's ``leader_win_rate`` has no value (its info's ``undefined``: the console's n/a line, the gates'
#: reason): there is no leader (trial49 B7: a gate said "no data: n = 0" of a run whose every match was a tie)
NO_LEADER = ("no leader: its contestants share rank 1 (e.g. every match a tie) or none was judged "
             "(walkovers, failed matches), as the slice's estimator says")



class Contestant(NamedTuple):
    """One assistant in a block: its id, its rendered answers, its language and qa ids."""

    assistant_id: str
    text: str
    language: str
    qa_ids: tuple
    n_turns: int


class Block(NamedTuple):
    """The answers of several assistants to the same questions; ``contestants`` in contest order."""

    block_id: str
    session_id: str
    language: str
    qa_ids: tuple
    contestants: tuple
    n_interactions: int


def block_key(block: str):
    """The key function of a block granularity: JSON ``[session_id]`` or ``[session_id, qa_id]``."""
    if block == "qa":
        return lambda x: json.dumps([x.session_id, x.qa_id], ensure_ascii=False, separators=(",", ":"))
    return lambda x: json.dumps([x.session_id], ensure_ascii=False, separators=(",", ":"))


def contest_order(ids, declared: Sequence[str] = ()) -> list[str]:
    """Declared ids present in ``ids`` (in declared order), then the other ids sorted."""
    present = set(ids)
    head = [c for c in dict.fromkeys(declared) if c in present]
    return head + sorted(present - set(head))


@beam.typehints.with_output_types(Any)
class _BuildBlock(beam.DoFn):
    """``(block id, [Interaction])`` → :class:`Block` (or a walkover record), with warnings."""

    def __init__(self, order: Sequence[str], mode: str):
        self.order, self.mode = tuple(order), mode

    def process(self, kv):
        block_id, items = kv
        by_assistant: dict[str, list] = {}
        for x in items:
            by_assistant.setdefault(x.assistant_id, []).append(x)
        contestants = []
        for aid in contest_order(by_assistant, self.order):
            turns = sorted(by_assistant[aid], key=lambda x: (x.turn_index, x.element_id))
            text = render_contestant([(x.query, x.assistant, x.ground_truth_assistant) for x in turns])
            langs = sorted({x.language for x in turns})
            contestants.append(Contestant(aid, text, langs[0] if len(langs) == 1 else "mixed",
                                          tuple(x.qa_id for x in turns), len(turns)))
        session_id = json.loads(block_id)[0]
        langs = sorted({c.language for c in contestants})
        language = langs[0] if len(langs) == 1 else "mixed"
        qa_sets = {c.qa_ids for c in contestants}
        qa_ids = contestants[0].qa_ids
        if len(qa_sets) > 1:
            yield beam.pvalue.TaggedOutput(QUALITY, QualityWarning(
                "bestof_question_mismatch", block_id,
                "contestants of this block answered different questions (qa_ids): " +
                "; ".join(f"{c.assistant_id}: {_first_qa_ids(c.qa_ids)}" for c in contestants[:3]) +
                (f"; and {len(contestants) - 3} more contestants" if len(contestants) > 3 else "")))
            qa_ids = tuple(dict.fromkeys(q for c in contestants for q in c.qa_ids))
        if self.order and any(c.assistant_id not in self.order for c in contestants):
            yield beam.pvalue.TaggedOutput(QUALITY, QualityWarning(
                "bestof_undeclared_contestant", block_id,
                "contestants not in the declared order were placed after it, sorted by id: " + _first_ids(
                    [c.assistant_id for c in contestants if c.assistant_id not in self.order])))
        block = Block(block_id, session_id, language, qa_ids, tuple(contestants), len(items))
        if len(contestants) == 1:
            yield beam.pvalue.TaggedOutput(QUALITY, QualityWarning(
                "bestof_walkover", block_id, f"only one assistant ({contestants[0].assistant_id}) answered: winner by walkover, no match"))
            yield _finish(block, self.mode, "walkover", contestants[0].assistant_id, [], 0, {})
            return
        yield block


def _first_ids(ids) -> str:
    """The first 3 of ``ids`` and how many more (a warning is bounded, issue 28)."""
    return ", ".join(ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")


def _first_qa_ids(qa_ids) -> str:
    """A contestant's qa_ids as one warning shows them: the first 3 and how many (issue 28: a
    warning is bounded, whatever the number of keys)."""
    shown = ", ".join(quoted(q) for q in qa_ids[:3])
    return f"[{shown}{f', ... ({len(qa_ids)} in all)' if len(qa_ids) > 3 else ''}]"


def _qa_label(qa_ids) -> str:
    return qa_ids[0] if len(qa_ids) == 1 else f"batch_len_{len(qa_ids)}"


def _contest(round_: int, left: str, right: str, winner: str, confidence: float, verdict: str,
             reasoning: dict, thinkings: Optional[str], judged: bool) -> dict:
    return {"round": round_, "left_id": left, "right_id": right, "winner_id": winner, "confidence": float(confidence),
            "verdict": verdict, "reasoning": reasoning, "thinkings": thinkings or None, "judged": judged}


class BlockScore(NamedTuple):
    """One judged (or walkover) block, the scorer's output: the engine's session key is
    ``(block_id, "", language)`` (a block is one unit across assistants, so it has no
    ``assistant_id``; its language cell rolls up into ``overall`` and ``language=…``)."""

    session_id: str
    assistant_id: str
    language: str
    record: dict
    contests: tuple
    unit: tuple


def _finish(block: Block, mode: str, status: str, winner: Optional[str], contests: list, n_failed: int, points: dict) -> BlockScore:
    """The block's :class:`BlockScore`: its record, its contest rows and its slice unit."""
    qa = _qa_label(block.qa_ids)
    rec = {
        "metric": "bestof", "level": "session", "session_id": block.session_id, "assistant_id": winner or "",
        "block_id": block.block_id, "qa_id": qa, "qa_ids": list(block.qa_ids), "language": block.language,
        "mode": mode, "status": status, "bestof_winner_id": winner,
        "contestants": [c.assistant_id for c in block.contestants], "points": points,
        "bestof_contests": contests, "n_interactions": block.n_interactions, "n_failed": n_failed,
    }
    rows = tuple({
        "metric": "bestof", "level": "interaction", "element_id": f"{block.block_id}#{c['round']}",
        "session_id": block.session_id, "assistant_id": c["winner_id"], "language": block.language,
        "turn_index": c["round"], "qa_id": qa, "block_id": block.block_id, "round": c["round"],
        "left_id": c["left_id"], "right_id": c["right_id"], "winner_id": c["winner_id"],
        "confidence": c["confidence"], "verdict": c["verdict"], "judged": c["judged"],
    } for c in contests)
    pairs = tuple((c["left_id"], c["right_id"], None if c["winner_id"] == "tie" else c["winner_id"]) for c in contests)
    unit = (tuple(c.assistant_id for c in block.contestants), winner, pairs, block.n_interactions, n_failed)
    return BlockScore(block.block_id, "", block.language, rec, rows, unit)


def _match_request(block: Block, a: Contestant, b: Contestant, criteria: Optional[str]):
    """The judge request of one match; its tag is the block's session key (its verdict's part)."""
    from fair_forge_beam.components.judge.handler import judge_request

    key = json.dumps([block.block_id, a.assistant_id, b.assistant_id], ensure_ascii=False, separators=(",", ":"))
    return judge_request(key, bestof_messages(a.text, b.text, criteria), schema=BestOfJudgeOutput,
                         element_id=f"{block.block_id}#{a.assistant_id}|{b.assistant_id}",
                         tag=session_key_text((block.block_id, "", block.language)))


def _verdict(parsed: Optional[dict], thinkings: Optional[str], left: str, right: str, round_: int) -> dict:
    """The contest row of a judged match from the validated answer ``parsed``."""
    parsed = parsed or {}
    w = parsed.get("winner")
    winner = left if w == "A" else right if w == "B" else "tie"
    return _contest(round_, left, right, winner, parsed.get("confidence", 0.0), str(parsed.get("verdict", "")),
                    _reasoning_text(parsed.get("reasoning")), thinkings, True)


def _reasoning_text(reasoning) -> dict:
    """The judge's free-form ``reasoning`` object as ``{label: text}`` (a typed map column of the
    session shards): string values as they are, any other value as its JSON text."""
    return {str(k): v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, sort_keys=True)
            for k, v in dict(reasoning or {}).items()}


def _identical(round_: int, left: str, right: str) -> dict:
    return _contest(round_, left, right, "tie", 1.0, "identical answers: a tie without a judge call", {}, None, False)


class _KingOfTheHill(beam.DoFn):
    """King of the hill over one block: matches in sequence (each depends on the previous)."""

    def __init__(self, handler, inference_args: Optional[dict], criteria: Optional[str]):
        self.handler, self.inference_args, self.criteria = handler, inference_args, criteria

    def setup(self):
        self._client = None
        self._failed = beam.metrics.Metrics.counter("fair_forge_beam.bestof", "failed_matches")

    def teardown(self):
        if getattr(self, "_client", None) is not None:
            self._client.close()
            self._client = None

    def _judge(self, req):
        """One judged match → ``(JudgeResult or None, reason, raw answer)``; never raises."""
        try:
            if self._client is None:
                self._client = self.handler.create_client()
            (res,) = list(self.handler.run_inference([req], self._client, self.inference_args))
        except Exception as exc:  # noqa: BLE001 - retries are exhausted: dead letter, not a crash
            return None, f"judge call failed: {plain_reason(exc)}"[:2000], ""
        if res.error is not None:
            return None, res.error, res.raw or ""
        return res, "", ""

    def process(self, block: Block):
        cs = block.contestants
        king = cs[0]
        contests, failed = [], 0
        for r, challenger in enumerate(cs[1:], start=1):
            if king.text == challenger.text:
                contests.append(_identical(r, king.assistant_id, challenger.assistant_id))
                continue
            req = _match_request(block, king, challenger, self.criteria)
            res, reason, raw = self._judge(req)
            if res is None:
                failed = 1
                self._failed.inc()
                raw = raw or json.dumps({"key": req.key, "messages": [list(m) for m in req.messages]}, ensure_ascii=False)
                yield beam.pvalue.TaggedOutput(DEAD, dead_letter("bestof", f"judge: {reason}", raw, req.element_id, f"judge:{req.key}"))
                break
            c = _verdict(res.parsed, res.reasoning, king.assistant_id, challenger.assistant_id, r)
            contests.append(c)
            if c["winner_id"] == challenger.assistant_id:
                king = challenger
        if failed:
            yield _finish(block, "king", "failed", None, contests, 1, {})
        else:
            yield _finish(block, "king", "decided", king.assistant_id, contests, 0, {})


def _pair_requests(criteria: Optional[str]):
    def fn(block: Block):
        cs = block.contestants
        for i in range(len(cs)):
            for j in range(i + 1, len(cs)):
                if cs[i].text != cs[j].text:
                    yield _match_request(block, cs[i], cs[j], criteria)

    return fn


class PairVerdict(NamedTuple):
    """A judged match of a block in all-pairs mode, its block's part ``(2, verdict)``."""

    left_id: str
    right_id: str
    parsed: dict
    thinkings: Optional[str]


def _pair_verdict(res):
    """A validated answer → the part ``(2, PairVerdict)`` of its block (the request's tag)."""
    _, a, b = json.loads(res.key)
    return (SessionPart.keyed(res.tag, (2, PairVerdict(a, b, res.parsed or {}, res.reasoning))),)


def _all_pairs(block: Block, verdicts: Sequence[PairVerdict]) -> BlockScore:
    """A block and its pairs' verdicts → its :class:`BlockScore`; a missing verdict is a failed judgement."""
    found = {}
    for v in verdicts:
        found.setdefault((v.left_id, v.right_id), v)
    cs = block.contestants
    points = {c.assistant_id: 0.0 for c in cs}
    contests, failed, r = [], 0, 0
    for i in range(len(cs)):
        for j in range(i + 1, len(cs)):
            a, b = cs[i].assistant_id, cs[j].assistant_id
            r += 1
            if cs[i].text == cs[j].text:
                c = _identical(r, a, b)
            elif (a, b) in found:
                c = _verdict(found[(a, b)].parsed, found[(a, b)].thinkings, a, b, r)
            else:
                failed += 1
                continue
            contests.append(c)
            if c["winner_id"] == "tie":
                points[a] += 0.5
                points[b] += 0.5
            else:
                points[c["winner_id"]] += 1.0
    if failed:
        return _finish(block, "all_pairs", "failed", None, contests, failed, points)
    top = max(points.values())
    leaders = [a for a, p in points.items() if p == top]
    if len(leaders) == 1:
        return _finish(block, "all_pairs", "decided", leaders[0], contests, 0, points)
    return _finish(block, "all_pairs", "tied", None, contests, 0, points)


class _BlockReducer(SessionReducer):
    """A block (the engine's session) → its record, its slice unit and its contest rows (the
    metric's interaction records). Its parts: a :class:`BlockScore` for a block scored by the
    scorer (king of the hill, walkover), or ``(1, Block)`` and its pairs' ``(2, PairVerdict)``
    in all-pairs mode, joined here. A block is scored once; only a window that fires several
    panes can bring it in parts, and then each part after the first is a data-quality warning."""

    def reduce(self, key, parts):
        blocks = [v for v in parts if isinstance(v, BlockScore)]
        verdicts = [v[1] for v in parts if not isinstance(v, BlockScore) and v[0] == 2]
        blocks += [_all_pairs(v[1], verdicts) for v in parts if not isinstance(v, BlockScore) and v[0] == 1]
        if not blocks:
            return None, None, [], []  # verdicts of a block that is in another pane
        first, *rest = blocks
        warnings = [QualityWarning(
            "bestof_block_in_parts", first.record["block_id"],
            f"this block reached the ranking in {len(blocks)} parts (window panes); only the part "
            f"with {first.record['contestants']} is ranked") ] if rest else []
        return first.record, first.unit, warnings, list(first.contests)


def _block_scored(record: dict) -> Optional[bool]:
    """A block counts toward its slices' ``n_blocks`` when it holds a contest (a judged match, or a
    tie of identical answers): True. A walkover ranks no one but has its verdict (a winner without a
    match): False, left out. A block whose every match failed was never judged: None, neither
    scored nor left out (its failed matches are dead letters), so a run whose every match failed
    scored nothing and is an empty run, as any judged metric's whose every judgement failed
    (``MetricSpec.scored``; trial40 J1)."""
    if record.get("bestof_contests"):
        return True
    return False if record.get("status") == "walkover" else None


class _RankSlice(SliceEstimator):
    """Slice statistics → :class:`BestOfSliceMetric` (Bradley–Terry ranking)."""

    def __init__(self, metric: "BestOf"):
        self.mode, self.prior_sd = metric.mode, metric.prior_sd
        self.bestof_mode, self.judge_model = metric.bestof_mode, metric.judge.model_name

    def estimate(self, key, accs, window, aux):
        (players, pairs), blocks, _, n_interactions, n_failed = _SLICE_STATS.extract_output(accs[1])
        n_blocks = accs.n_sessions  # blocks with a judged match (the engine's count; the spec's `scored`)
        wlt = counts_by_player(players, pairs)
        bt = estimate_bradley_terry(pairs, wlt, self.mode, self.prior_sd, "bestof", key, "bradley-terry")
        fit, strengths, extra = bt.fit, bt.strengths, bt.ranks
        # the one-session rule (statistical/slices.py; a block is the engine's session): one block
        # gives no interval of a strength, no probability of being best and no expected rank
        one = single_session(n_blocks, self.mode)
        if one:
            strengths = {p: slice_estimate(e, n_blocks, self.mode) for p, e in strengths.items()}
            extra = {}
        bmap = {k: (n, w) for k, n, w in blocks}
        rows = []
        for p in players:
            w, l, t = wlt[p]
            games = w + l + t
            rows.append({
                "assistant_id": p, "blocks": bmap.get(p, (0, 0))[0], "blocks_won": bmap.get(p, (0, 0))[1],
                "wins": w, "losses": l, "ties": t, "win_rate": (w + 0.5 * t) / games if games else None,
                "strength": strengths.get(p, Estimate(n=games)).model_dump(),
                "rating": elo_scale(strengths[p].mean) if p in strengths else None,
                "prob_best": extra.get(p, (None, None))[0], "mean_rank": extra.get(p, (None, None))[1],
            })

        def order(r):
            s = r["strength"]["mean"]
            wr = r["win_rate"]
            return (s is None, -(s or 0.0), wr is None, -(wr or 0.0), -r["blocks_won"], r["assistant_id"])

        rows.sort(key=order)  # the order rows are listed in; their ranks come from the estimates alone
        # the tie rule (docs/metrics/bestof.md): standard competition ranks of the estimate — the
        # strength (MLE, or the posterior mode in Bayesian mode, never the MC draws) when it exists,
        # else the win rate — equal estimates share a rank; a contestant with no judged match has none
        by_strength = any(r["strength"]["mean"] is not None for r in rows)
        ranks = competition_ranks([r["strength"]["mean"] if by_strength else r["win_rate"] for r in rows],
                                  STRENGTH_TIE_TOLERANCE if by_strength else 0.0)
        for r, k in zip(rows, ranks):
            r["rank"] = k
        n_contests = sum(sum(c) for _, c in pairs)
        estimator = f"{bt.estimator}; {SINGLE_SESSION_NOTE}" if one else bt.estimator
        # the leader is the one rank-1 assistant: none when no match was judged (a slice whose blocks
        # were all walkovers or failed, trial35 T7, trial40 J1) or when several share rank 1 (all
        # ties, trial40 J4: never the first id of a tie)
        top = [r for r in rows if r["rank"] == 1]
        leader = top[0] if len(top) == 1 else None
        if not n_contests:
            estimator = "not estimated: no match was judged in this slice (its blocks were walkovers or failed)"
        elif len(top) > 1:
            estimator += (f"; no leader: {len(top)} contestants share rank 1 "
                          f"(equal {'strengths' if by_strength else 'win rates'})")
        rec = BestOfSliceMetric(
            slice=key, mode=self.mode.get_result_type(), bestof_mode=self.bestof_mode, n_blocks=n_blocks,
            n_interactions=n_interactions, n_contests=n_contests, n_failed=n_failed,
            leader=leader["assistant_id"] if leader else None,
            leader_win_rate=slice_win_rate(leader["wins"], leader["losses"], leader["ties"], n_blocks, self.mode)
            if leader else Estimate(),
            ranking=rows, estimator=estimator, mle_exists=fit.mle_exists if n_contests else None,
            judge_model=self.judge_model,
        )
        return [rec]


_SLICE_STATS = SliceStatsCombineFn()


def _block_order(v: tuple) -> tuple:
    # scored blocks by (block id, contestants, interactions), then blocks to join with their
    # verdicts, then verdicts by pair and content: a total order, never arrival order
    if isinstance(v, BlockScore):
        return (0, v.record["block_id"], v.record["contestants"], v.record["n_interactions"])
    kind, x = v
    if kind == 1:
        return (1, x.block_id, [c.assistant_id for c in x.contestants], x.n_interactions)
    return (2, x.left_id, x.right_id, json.dumps(x.parsed, sort_keys=True), x.thinkings or "")


def _block_value(s) -> tuple:
    """A scorer output → its block's part: a :class:`BlockScore` itself, or the part a
    :class:`SessionPart` carries."""
    return s.value if isinstance(s, SessionPart) else s


def _unjudged_part(b: Block) -> SessionPart:
    return SessionPart(b.block_id, "", b.language, (1, b))


def _build_blocks(m: "BestOf", interactions):
    """Interactions → blocks (keyed by ``block_key``) → blocks to judge (main) and walkovers
    (already scored, tagged ``"walkovers"``), with data-quality warnings."""
    built = (
        interactions
        | "KeyByBlock" >> beam.Map(lambda x, f=block_key(m.block): (f(x), x)).with_output_types(typing.Tuple[str, typing.Any])
        | "CollectBlocks" >> GroupPerSession()
        | "BuildBlocks" >> beam.ParDo(_BuildBlock(m.contestant_order, m.bestof_mode)).with_outputs(QUALITY, main="main")
    )
    # _BuildBlock emits Blocks (to judge) and walkovers (already scored) on its main output
    blocks = built.main | "Blocks" >> beam.Filter(lambda b: isinstance(b, Block))
    walkovers = built.main | "Walkovers" >> beam.Filter(lambda b: not isinstance(b, Block))
    return blocks, walkovers, built[QUALITY]


class _KingScorer(beam.PTransform):
    """The scorer in king mode: blocks → king of the hill, one ``DoFn`` call per block (its
    matches depend on each other, so they run in sequence) → one :class:`BlockScore` per block;
    returns ``{"scores", "dead_letter", "quality"}``."""

    def __init__(self, metric: "BestOf"):
        super().__init__()
        self.metric = metric

    def expand(self, interactions):
        m = self.metric
        blocks, walkovers, quality = _build_blocks(m, interactions)
        judged = blocks | "KingOfTheHill" >> beam.ParDo(
            _KingOfTheHill(m.judge, m.inference_args, m.criteria)).with_outputs(DEAD, main="main")
        return {"scores": (walkovers, judged.main) | "FlattenBlocks" >> beam.Flatten(), "dead_letter": judged[DEAD],
                "quality": quality}


def _all_pairs_scorer(m: "BestOf"):
    """The scorer in all-pairs mode: blocks → every pair through the one judge scorer
    (``RunJudge``); the block and its verdicts are parts of the block's session, joined by the
    session reducer."""
    from fair_forge_beam.metrics.judged import JudgeScorer

    def build(interactions):
        from fair_forge_beam.components.judge.handler import JudgeRequest

        blocks, walkovers, quality = _build_blocks(m, interactions)
        requests = blocks | "PairRequests" >> beam.FlatMap(_pair_requests(m.criteria)).with_output_types(JudgeRequest)
        return {"requests": requests, "parts": [walkovers, blocks | "BlockParts" >> beam.Map(_unjudged_part)],
                "quality": quality}

    return JudgeScorer(m.judge, build, _pair_verdict, "bestof", inference_args=m.inference_args)


class BestOf(MetricTransform):
    """``PCollection[Interaction]`` → BestOf results (spec §6.6; see the module docstring).

    Args:
        judge: an :class:`~fair_forge_beam.components.judge.OpenAIJudgeHandler` or a mapping of
            its arguments; required (``ValueError`` before any pipeline is built).
        statistical_mode: :class:`FrequentistMode` (MLE + Wald intervals) or
            :class:`BayesianMode` (Laplace posterior, credible intervals, ``P(best)``).
        mode: ``"king"`` (king of the hill, upstream) or ``"all_pairs"``.
        contestant_order: declared contest order (assistant ids); the rest follow, sorted.
        block: ``"session"`` (whole conversations per ``session_id``) or ``"qa"`` (one block
            per ``(session_id, qa_id)``).
        criteria: extra judging criteria added to the rubric (None → the rubric only).
        slices: any of ``"overall"``, ``"language"`` (a ranking per assistant makes no sense).
        prior_sd: σ of the ``N(0, σ²)`` prior on Bradley–Terry log-strengths (Bayesian mode).
        inference_args: extra sampling parameters for every judge call (part of the cache key).

    Returns (``expand``): dict of PCollections ``interactions`` (one
    :class:`BestOfContestRecord` dict per match), ``sessions`` (one :class:`BestOfMetric` dict
    per block), ``slices`` (:class:`BestOfSliceMetric`), ``dead_letter`` and ``quality``.

    Raises:
        ValueError: unknown ``mode`` / ``block`` / slice, ``prior_sd`` ≤ 0, no judge.
    """

    name = "bestof"
    info = MetricInfo(
        name="bestof",
        # the leader's share of its matches: a ranking, with no better side across runs
        estimates=(EstimateInfo("leader_win_rate", "leader win rate", unit="share of matches", gate="leader_win_rate",
                                headline=True, undefined=NO_LEADER),),
        parquet=(ParquetColumns("fair_forge_beam.schemas.best_of:BestOfContestRecord",
                                ("block_id", "round", "left_id", "right_id", "winner_id", "confidence", "verdict",
                                 "judged"), "bestof_"),),
        dead_letter_unit="failed matches (one per judge call between two contestants)",
        left_out="blocks never compared (walkovers)",
        slice_dimensions=BESTOF_SLICES,
        sessions_field="n_blocks",  # the resampling unit: a block (a session, or one question)
        sessions_unit="block",
        plot="plot_bestof",
    )
    interaction_schema = BestOfContestRecord
    session_schema = BestOfMetric
    slice_schema = BestOfSliceMetric

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(
        self,
        judge: Any = None,
        statistical_mode: Optional[StatisticalMode] = None,
        mode: str = "king",
        contestant_order: Union[str, Sequence[str], None] = None,
        block: str = "session",
        criteria: Optional[str] = None,
        slices: Sequence[str] = ("overall", "language"),
        prior_sd: float = 1.0,
        inference_args: Optional[Mapping[str, Any]] = None,
    ):
        bad = [s for s in slices if s not in BESTOF_SLICES]
        if bad:
            raise ValueError(f"BestOf slices must be among {list(BESTOF_SLICES)}, got {bad}")
        super().__init__(statistical_mode, slices)
        if mode not in BESTOF_MODES:
            raise ValueError(f"mode must be one of {BESTOF_MODES}, got {quoted(mode)}")
        if block not in BLOCKS:
            raise ValueError(f"block must be one of {BLOCKS}, got {quoted(block)}")
        if not (isinstance(prior_sd, (int, float)) and np.isfinite(prior_sd) and prior_sd > 0):
            raise ValueError(f"prior_sd must be a finite number > 0, got {quoted(prior_sd)}")
        if isinstance(contestant_order, str):
            contestant_order = [c.strip() for c in contestant_order.split(",") if c.strip()]
        self.judge = build_judge(judge, BestOfJudgeOutput)
        self.bestof_mode, self.block, self.criteria = mode, block, criteria
        self.contestant_order = tuple(contestant_order or ())
        self.prior_sd = float(prior_sd)
        self.inference_args = inference_arguments(inference_args)  # checked: a secret in the wrong key is never sent

    def spec(self, windowed: bool = False) -> MetricSpec:
        """This metric's declaration for :class:`~fair_forge_beam.engine.Engine`: the scorer
        builds and judges the blocks; the engine's session is the block."""
        return MetricSpec(
            name=self.name,
            scorer=_KingScorer(self) if self.bestof_mode == "king" else _all_pairs_scorer(self),
            interaction_record=None,
            session_interactions=True,
            session_value=_block_value,
            session_order=_block_order,
            session_reducer=_BlockReducer(),
            session_slice_combine=AccumulatorOutput(SliceStatsCombineFn()),
            estimator=_RankSlice(self),
            scored=_block_scored,
            # the main job's --slices may name assistant_id: a ranking per assistant makes no sense
            slices=tuple(x for x in self.slices if x in BESTOF_SLICES),
            reads=frozenset({"query", "assistant", "ground_truth_assistant"}),  # each contestant's turns
        )

    @classmethod
    def run(cls, retriever, verbose: bool = False, pipeline_args: Optional[Sequence[str]] = None, **kwargs) -> MetricResults:
        """Upstream-style one-shot run (see :meth:`MetricTransform.run`); ``judge=`` is required.

        Returns a :class:`MetricResults` whose list holds **one** :class:`BestOfMetric` **per
        block** (as upstream, plus walkover/failed blocks), ordered by session and block id;
        ``.interactions`` = the contests as flat rows, ``.slices`` = the rankings,
        ``.dead_letter``, ``.quality`` as usual."""
        res = super().run(retriever, verbose=verbose, pipeline_args=pipeline_args, **kwargs)
        blocks = sorted(res.sessions, key=lambda b: (b.session_id, b.block_id))
        out = MetricResults(blocks, blocks, res.slices, res.dead_letter, res.quality)
        out.interactions = sorted(res.interactions, key=lambda c: (c.block_id, c.round))
        return out
