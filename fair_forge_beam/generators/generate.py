"""Generating test sets with an LLM (spec §10), as a Beam pipeline over the judge handler.

    chunks (loader) ─► groups (strategy) ─► one JudgeRequest per (group, chunk)
        ─► RunJudge(OpenAIJudgeHandler: structured output, strict schema validation, cache,
           retries, dead letter) ─► GroupByKey(group) ─► Dataset records ─► JSONL / Parquet

The chunk list and the groups are small and computed by the launcher (a strategy needs the whole
list, spec §18.1); every LLM call runs in the pipeline. Reproducibility: the session id is the
BLAKE2b digest of ``(seed, strategy, group index, mode, count, assistant_id, language, chunk
digests)`` (never ``uuid4``), prompts are fixed text, and the written file is sorted by group
index, so the same corpus, seed and cached answers give the same bytes.

Record shape (spec §10, ``generate_dataset``): ``context`` = the group's chunk contents joined by
blank lines; one ``Batch`` per generated query (``qa_id = <chunk_id>_q<i>``, 1-based) or turn
(``<chunk_id>_t<turn_number>``), empty ``assistant`` and ``ground_truth_assistant``, an
``observation`` naming the source chunk (and turn), ``agentic`` = ``{chunk_id, difficulty?,
query_type?}`` or for conversations ``{chunk_id, turn_number, conversation_mode: true,
builds_on (turn > 1), difficulty?, query_type?, expected_context?}``. A chunk that appears again
in one group (sampling with replacement) gets ``#<occurrence>`` after the chunk id in its ids
(occurrence ≥ 2), so qa_ids stay unique. Every appearance of a chunk in the plan — in the same group
or in another — is its own request: identical prompts are told apart by ``sample_index`` (0 for the
first appearance in the plan, then 1, 2, …), so each has its own cache entry and every request is
asked exactly once. (Before, two groups sharing a chunk sent two requests with one cache key: the
second was asked or answered from the cache depending on timing, and a cached re-run could differ
from the first run.)

Faults: an answer that never validates, an HTTP error that stays, a conversation with repeated
turn numbers, an answer's questions that are blank or damaged (:func:`generated_items`: the
answer's other questions are kept, a conversation is rejected whole) → dead letter (stage
``"generator"``, reason, raw answer); the group's other chunks still make the session; a group
with no usable chunk makes no session. Usable questions past the number asked are cut, counted
(``surplus``) and warned about.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
import typing
from typing import Any, Optional, Sequence

from fair_forge_beam._beam import beam
from fair_forge_beam.blank import is_blank, unreadable_text_reason
from fair_forge_beam.components.judge.prompts import PromptTemplate
from fair_forge_beam.io.elements import dead_letter
from fair_forge_beam.generators.schemas import (
    Chunk,
    GeneratedConversationOutput,
    GeneratedQueriesOutput,
)
from fair_forge_beam.generators.strategies import BaseChunkSelectionStrategy, SequentialStrategy, chunk_digest
from fair_forge_beam.plain import plain_reason
from fair_forge_beam.arguments import checks_arguments
from fair_forge_beam.options import bound_problem, checked_pipeline_args, option

__all__ = ["Generator", "GenerateDataset", "WriteGenerated", "generator_handler", "plan_requests", "GenerationPlan",
           "query_messages", "conversation_messages", "GENERATOR_NAMESPACE", "OUTPUT_FILES",
           "generation_shortfall", "shortfall_warning", "generated_items", "generation_surplus", "generation_warnings"]

GENERATOR_NAMESPACE = "fair_forge_beam.generator"
SURPLUS = "surplus"  #: the tagged output and summary field of answers that held more than asked
OUTPUT_FILES = ("dataset.jsonl", "dataset.parquet", "dead_letter.jsonl", "generation_summary.json")

_QUERY_SYSTEM = (
    "You write evaluation questions for an AI assistant from a piece of documentation.\n\n"
    "Context:\n{{ context }}\n\n"
    "Write exactly {{ num_queries }} questions that a real user could ask and that the context answers. "
    "Make them diverse: mix recall, comprehension and application questions; keep them open-ended "
    "(no yes/no questions) and grounded in the context only. Label each with a difficulty (easy, medium, "
    "hard) and a query_type (recall, comprehension, application).\n"
    "{{ seed_examples_section }}"
    'Answer with JSON: {"queries": [{"query": "...", "difficulty": "...", "query_type": "..."}], '
    '"chunk_summary": "one sentence on what the context covers"}.'
)
_CONVERSATION_SYSTEM = (
    "You write a multi-turn conversation that a user could have with an AI assistant about a piece of "
    "documentation. Write only the user's turns.\n\n"
    "Context:\n{{ context }}\n\n"
    "Write exactly {{ num_turns }} user turns, numbered from 1 (turn_number). Start broad; each turn builds "
    "on the previous ones; progress from recall to analysis. Every turn must be answerable from the context. "
    "Give each turn a difficulty, a query_type and, when useful, expected_context (the part of the context "
    "that answers it).\n"
    "{{ seed_examples_section }}"
    'Answer with JSON: {"turns": [{"query": "...", "turn_number": 1, "difficulty": "...", "query_type": "...", '
    '"expected_context": "..."}], "conversation_summary": "...", "chunk_summary": "..."}.'
)
_QUERY_TEMPLATE = PromptTemplate(_QUERY_SYSTEM, {"context", "num_queries", "seed_examples_section"}, fenced={"context"})
_CONVERSATION_TEMPLATE = PromptTemplate(_CONVERSATION_SYSTEM, {"context", "num_turns", "seed_examples_section"}, fenced={"context"})
_SEED_TEMPLATE = PromptTemplate("Match the style of these example questions:\n{{ examples }}\n", {"examples"}, fenced={"examples"},
                                data_note=False)


def _seed_section(seed_examples: Optional[Sequence[str]]) -> str:
    if not seed_examples:
        return ""
    return _SEED_TEMPLATE.render(examples="\n".join(f"- {e}" for e in seed_examples))


def _custom_system(custom: str, context: str, n: int, seed_examples) -> str:
    from fair_forge_beam.components.judge.parsing import fence

    tpl = PromptTemplate(custom, None, fenced=())
    values = {"context": fence("context", context), "num_queries": n, "num_turns": n,
              "seed_examples_section": _seed_section(seed_examples)}
    out = tpl.render({k: v for k, v in values.items() if k in tpl.slots})
    from fair_forge_beam.components.judge.prompts import DATA_NOTE

    # fenced text in it (the context, the seed examples): say what the fences mean, as our own templates do
    return DATA_NOTE + out if tpl.slots & {"context", "seed_examples_section"} else out


def _messages(template: PromptTemplate, slot: str, n: int, chunk: Chunk, seed_examples, custom: Optional[str],
              ask: str) -> tuple:
    """``((role, content), …)``: the system prompt (``template``, or the ``custom`` one) with ``n`` in
    its slot ``slot``, then the user's ``ask`` (a format string of ``int(n)``). Raises ``ValueError``
    when ``n < 1``."""
    problem = bound_problem(option("num-queries"), n)  # the command line's range (trial47 B3)
    if problem:
        raise ValueError(f"{slot} {problem}")
    if int(n) < 1:
        raise ValueError(f"{slot} must be >= 1, got {n}")
    if custom:
        system = _custom_system(custom, chunk.content, n, seed_examples)
    else:
        system = template.render(context=chunk.content, seed_examples_section=_seed_section(seed_examples), **{slot: n})
    return (("system", system), ("user", ask.format(int(n))))


def query_messages(chunk: Chunk, num_queries: int = 3, seed_examples: Optional[Sequence[str]] = None,
                   custom_system_prompt: Optional[str] = None) -> tuple:
    """Messages asking for ``num_queries`` questions about ``chunk`` (``((role, content), …)``).

    ``custom_system_prompt``: a jinja2 template (sandboxed) that may use ``{{ context }}`` (fenced),
    ``{{ num_queries }}`` and ``{{ seed_examples_section }}``. Raises ``ValueError`` when
    ``num_queries < 1``."""
    return _messages(_QUERY_TEMPLATE, "num_queries", num_queries, chunk, seed_examples, custom_system_prompt,
                     "Generate exactly {} questions about the context.")


def conversation_messages(chunk: Chunk, num_turns: int = 3, seed_examples: Optional[Sequence[str]] = None,
                          custom_system_prompt: Optional[str] = None) -> tuple:
    """Messages asking for a ``num_turns``-turn conversation about ``chunk`` (as :func:`query_messages`;
    a custom template may use ``{{ num_turns }}``)."""
    return _messages(_CONVERSATION_TEMPLATE, "num_turns", num_turns, chunk, seed_examples, custom_system_prompt,
                     "Generate a conversation of exactly {} user turns about the context.")


def generator_handler(model: str, base_url: Optional[str] = None, *, use_structured_output: bool = True, **kwargs):
    """An :class:`~fair_forge_beam.components.judge.handler.OpenAIJudgeHandler` for generation:
    counters under ``fair_forge_beam.generator``, ``structured_output="auto"`` (JSON schema, stepping
    down on HTTP 400) or ``"text"`` when ``use_structured_output`` is False (schema in the prompt;
    the answer is read with the same strict rule). ``kwargs`` go to the handler (``cache_path``,
    ``request_timeout``, ``client_retries``, ``max_concurrency``, ``params``, …)."""
    from fair_forge_beam.components.judge.handler import OpenAIJudgeHandler

    kwargs.setdefault("namespace", GENERATOR_NAMESPACE)
    return OpenAIJudgeHandler(model, base_url, structured_output="auto" if use_structured_output else "text", **kwargs)


# ----------------------------------------------------------------------------------------------
# Planning (launcher side: small)
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GenerationPlan:
    """What the pipeline asks and how it assembles the answers.

    ``groups``: per group ``{"index", "session_id", "context", "slots": [[pos, chunk_id,
    occurrence], …]}``; ``requests``: the :class:`~fair_forge_beam.components.judge.handler.JudgeRequest`
    list (key ``"<group index:06d>/<pos:04d>"``)."""

    groups: tuple
    requests: tuple
    conversation_mode: bool
    num: int
    assistant_id: str
    language: str


def session_id_for(seed: int, strategy: dict, index: int, conversation_mode: bool, num: int, assistant_id: str,
                   language: str, chunks: Sequence[Chunk]) -> str:
    """``"gen-"`` + 32 hex digits of BLAKE2b over the canonical JSON of the arguments (chunks by
    digest of id and content)."""
    doc = [int(seed), strategy, int(index), bool(conversation_mode), int(num), assistant_id, language,
           [chunk_digest(c) for c in chunks]]
    blob = json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "gen-" + hashlib.blake2b(blob.encode("utf-8"), digest_size=16).hexdigest()


def plan_requests(chunks: Sequence[Chunk], assistant_id: str, *, num_queries_per_chunk: int = 3, language: str = "english",
                  seed_examples: Optional[Sequence[str]] = None, custom_system_prompt: Optional[str] = None,
                  selection_strategy: Optional[BaseChunkSelectionStrategy] = None, conversation_mode: bool = False,
                  seed: int = 0) -> GenerationPlan:
    """Groups and requests for ``chunks`` (see :class:`GenerationPlan`). Raises ``ValueError`` on an
    empty ``assistant_id`` or a count < 1."""
    from fair_forge_beam.components.judge.handler import judge_request

    if not assistant_id or is_blank(str(assistant_id)):
        raise ValueError("assistant_id must be a non-empty string")
    strategy = selection_strategy or SequentialStrategy()
    schema = GeneratedConversationOutput if conversation_mode else GeneratedQueriesOutput
    build = conversation_messages if conversation_mode else query_messages
    groups, requests = [], []
    asked: dict[tuple, int] = {}  # identical prompts so far in the whole plan → next sample_index
    for gi, group in enumerate(strategy.select(list(chunks))):
        seen: dict[str, int] = {}
        slots = []
        for pos, c in enumerate(group):
            occ = seen[c.chunk_id] = seen.get(c.chunk_id, 0) + 1
            slots.append([pos, c.chunk_id, occ])
            msgs = build(c, num_queries_per_chunk, seed_examples, custom_system_prompt)
            ident = tuple(tuple(m) for m in msgs)
            sample = asked[ident] = asked.get(ident, -1) + 1
            requests.append(judge_request(f"{gi:06d}/{pos:04d}", msgs, schema=schema, sample_index=sample, element_id=c.chunk_id))
        sid = session_id_for(seed, strategy.describe(), gi, conversation_mode, num_queries_per_chunk, assistant_id, language, group)
        groups.append({"index": gi, "session_id": sid, "context": "\n\n".join(c.content for c in group), "slots": slots})
    from fair_forge_beam.io.secrets import mask_id

    # the id the sessions carry, masked as the reader masks record ids (a key in it never reaches a name)
    return GenerationPlan(tuple(groups), tuple(requests), bool(conversation_mode), int(num_queries_per_chunk),
                          mask_id(assistant_id), language)


# ----------------------------------------------------------------------------------------------
# Assembling answers (pipeline side)
# ----------------------------------------------------------------------------------------------
def _qa_prefix(chunk_id: str, occurrence: int) -> str:
    return chunk_id if occurrence == 1 else f"{chunk_id}#{occurrence}"


def generated_items(parsed: dict, conversation_mode: bool, requested: Optional[int] = None) -> tuple:
    """``(kept, rejected, cut)``: the questions (``parsed["queries"]``) or turns (``parsed["turns"]``,
    by turn number) of one validated answer that are used, the problems of the others, and how many
    usable ones past ``requested`` were cut.

    An item whose ``query`` is no text to use (:func:`~fair_forge_beam.blank.unreadable_text_reason`:
    blank — empty, whitespace, invisible characters, only combining marks — as explain refuses a
    prompt, or holding a control character that is not whitespace) is rejected: a question is left
    out (the answer's other questions are kept), a conversation is rejected whole (its later turns
    build on the missing one). Of the usable items, the first ``requested`` are kept: an answer with
    more than asked never grows the test set past ``--num-queries`` per chunk (the surplus is counted
    and warned about, :func:`generation_surplus`). Raises ``ValueError`` when a conversation repeats
    a turn number."""
    if not conversation_mode:
        kept, rejected = [], []
        for i, q in enumerate(parsed["queries"]):
            why = unreadable_text_reason("question", q["query"])
            if why:
                rejected.append(f"queries[{i}]: {why}")
            else:
                kept.append(q)
    else:
        turns = sorted(parsed["turns"], key=lambda t: t["turn_number"])
        numbers = [t["turn_number"] for t in turns]
        if len(set(numbers)) != len(numbers):
            raise ValueError(f"conversation repeats turn numbers {numbers}")
        rejected = [f"turn {t['turn_number']}: {why}" for t in turns
                    for why in [unreadable_text_reason("question", t["query"])] if why]
        kept = [] if rejected else turns
    limit = len(kept) if requested is None else max(0, int(requested))
    return kept[:limit], rejected, max(0, len(kept) - limit)


def _rejected_reason(rejected: Sequence[str], returned: int, key: str) -> str:
    """One dead letter's reason for an answer's rejected items: how many, the first three problems."""
    what = "turns" if key == "turns" else "questions"
    whole = " (a conversation is kept whole or not at all)" if key == "turns" else ""
    shown = "; ".join(rejected[:3]) + (f"; and {len(rejected) - 3} more" if len(rejected) > 3 else "")
    return f"{len(rejected)} of the {returned} generated {what} not used{whole}: {shown}"


def batches_for(chunk_id: str, occurrence: int, parsed: dict, conversation_mode: bool) -> list[dict]:
    """``Batch`` dicts (spec §10 shape) from the items of one validated answer (``parsed``, its
    ``queries`` or ``turns`` already checked: :func:`generated_items`)."""
    prefix = _qa_prefix(chunk_id, occurrence)
    out = []
    if not conversation_mode:
        for i, q in enumerate(parsed["queries"], start=1):
            agentic = {"chunk_id": chunk_id}
            for k in ("difficulty", "query_type"):
                if q.get(k) is not None:
                    agentic[k] = q[k]
            out.append({"qa_id": f"{prefix}_q{i}", "query": q["query"], "assistant": "", "ground_truth_assistant": "",
                        "observation": f"Generated from chunk {chunk_id}", "agentic": agentic, "ground_truth_agentic": {}})
        return out
    prev = None
    for t in parsed["turns"]:
        n = t["turn_number"]
        agentic: dict[str, Any] = {"chunk_id": chunk_id, "turn_number": n, "conversation_mode": True}
        if prev is not None:
            agentic["builds_on"] = prev
        for k in ("difficulty", "query_type", "expected_context"):
            if t.get(k) is not None:
                agentic[k] = t[k]
        qa_id = f"{prefix}_t{n}"
        out.append({"qa_id": qa_id, "query": t["query"], "assistant": "", "ground_truth_assistant": "",
                    "observation": f"Generated from chunk {chunk_id}, turn {n}", "agentic": agentic, "ground_truth_agentic": {}})
        prev = qa_id
    return out


@beam.typehints.with_output_types(typing.Tuple[int, typing.Tuple[int, Any]])
class _ToBatches(beam.DoFn):
    """``JudgeResult`` → ``(group index, (position, [Batch dict, …]))`` of its usable items
    (:func:`generated_items`, at most ``requested``); a conversation with repeated turn numbers, an
    answer with rejected items (blank, damaged) → one dead letter with the raw answer; an answer with
    more usable items than asked → ``TaggedOutput("surplus", (returned, cut))``."""

    def __init__(self, slots: dict, conversation_mode: bool, requested: Optional[int] = None):
        self._slots, self._conv, self._requested = slots, conversation_mode, requested

    def process(self, res):
        gi, pos = res.key.split("/")
        chunk_id, occ = self._slots[res.key]
        key = "turns" if self._conv else "queries"

        def dead(reason):
            return beam.pvalue.TaggedOutput("dead", dead_letter("generator", reason, res.raw, element_id=chunk_id,
                                                                source=f"generator:{res.key}"))

        try:
            kept, rejected, cut = generated_items(res.parsed, self._conv, self._requested)
        except ValueError as exc:
            yield dead(plain_reason(exc))
            return
        if rejected:
            yield dead(_rejected_reason(rejected, len(res.parsed[key]), key))
        if cut:
            yield beam.pvalue.TaggedOutput(SURPLUS, (len(kept) + cut, cut))
        if kept:  # an answer with no usable item adds nothing to its group (a group with none makes no session)
            yield int(gi), (int(pos), batches_for(chunk_id, occ, {**res.parsed, key: kept}, self._conv))


@beam.typehints.with_output_types(typing.Tuple[int, typing.Dict[str, Any]])
class _BuildDataset(beam.DoFn):
    """``(group index, parts)`` → ``(group index, Dataset dict)``, batches in chunk order."""

    def __init__(self, groups: dict, assistant_id: str, language: str):
        self._groups, self._assistant, self._language = groups, assistant_id, language

    def process(self, kv):
        gi, parts = kv
        g = self._groups[gi]
        conversation = [b for _, bs in sorted(parts, key=lambda t: t[0]) for b in bs]
        yield gi, {"session_id": g["session_id"], "assistant_id": self._assistant, "language": self._language,
                   "context": g["context"], "conversation": conversation}


def _as_generator_stage(d):
    """A dead letter of the generator's calls, named as the generator's (stage and source; its ``source`` said
    ``judge:<key>``, trial38 T13)."""
    if d.stage != "judge":
        return d
    source = d.source
    if isinstance(source, str) and source.startswith("judge:"):
        source = "generator:" + source[len("judge:"):]
    return d._replace(stage="generator", source=source)


class GenerateDataset(beam.PTransform):
    """``PBegin`` → ``{"datasets": PCollection[(group index, Dataset dict)], "dead_letter":
    PCollection[DeadLetter]`` (stage ``"generator"``), ``"surplus": PCollection[(returned, cut)]`` (one per
    answer with more usable items than ``plan.num``)}: asks ``plan.requests`` through
    ``RunJudge(handler)`` and assembles one session per group (:func:`generated_items`)."""

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(self, handler, plan: GenerationPlan):
        super().__init__()
        self._handler, self._plan = handler, plan

    def expand(self, pbegin):
        from fair_forge_beam.components.judge.handler import RunJudge

        plan = self._plan
        slots = {f"{g['index']:06d}/{pos:04d}": (cid, occ) for g in plan.groups for pos, cid, occ in g["slots"]}
        groups = {g["index"]: g for g in plan.groups}
        reqs = pbegin | "GenRequests" >> beam.Create(list(plan.requests), reshuffle=False)
        judged = reqs | "GenAsk" >> RunJudge(self._handler, label_prefix="Gen")
        parts = judged.results | "GenBatches" >> beam.ParDo(_ToBatches(slots, plan.conversation_mode, plan.num)).with_outputs(
            "dead", SURPLUS, main="ok")
        datasets = (parts.ok | "GenGroup" >> beam.GroupByKey()
                    | "GenDataset" >> beam.ParDo(_BuildDataset(groups, plan.assistant_id, plan.language)))
        dead = ((judged.dead_letters | "GenStage" >> beam.Map(_as_generator_stage), parts["dead"])
                | "GenDead" >> beam.Flatten())
        return {"datasets": datasets, "dead_letter": dead, SURPLUS: parts[SURPLUS]}


def generation_shortfall(records: Sequence[dict], requested_per_chunk: int) -> dict:
    """How many questions (or turns) came back against ``requested_per_chunk`` per answered chunk.

    ``records``: Dataset dicts as written (qa ids ``<chunk prefix>_q<i>`` / ``_t<n>``, see
    :func:`batches_for`). Returns ``{"requested_per_chunk", "chunks_answered", "chunks_short",
    "requested", "generated", "missing"}`` (counts ≥ 0; ``requested`` = chunks answered ×
    requested per chunk; ``missing`` sums the per-chunk shortfalls, so a chunk answered with more
    than asked does not hide another's shortfall). Dead-lettered chunks are not counted here
    (they are in ``dead_letters``)."""
    per_chunk: dict[tuple, int] = {}
    for i, r in enumerate(records):
        for b in r.get("conversation") or []:
            key = (i, str(b["qa_id"]).rsplit("_", 1)[0])
            per_chunk[key] = per_chunk.get(key, 0) + 1
    n = int(requested_per_chunk)
    short = [max(0, n - got) for got in per_chunk.values()]
    return {"requested_per_chunk": n, "chunks_answered": len(per_chunk), "chunks_short": sum(1 for x in short if x),
            "requested": n * len(per_chunk), "generated": sum(per_chunk.values()), "missing": sum(short)}


def shortfall_warning(shortfall: Optional[dict]) -> Optional[str]:
    """The warning line for a :func:`generation_shortfall` with something missing, else None."""
    if not shortfall or not shortfall.get("missing"):
        return None
    return (f"the generator returned fewer questions than asked: {shortfall['missing']} of {shortfall['requested']} missing "
            f"({shortfall['requested_per_chunk']} asked per chunk; {shortfall['chunks_short']} of "
            f"{shortfall['chunks_answered']} chunk(s) short); see 'shortfall' in generation_summary.json")


def generation_surplus(surplus: Sequence, requested_per_chunk: Optional[int]) -> dict:
    """How many usable questions (or turns) past ``requested_per_chunk`` were cut: ``surplus`` holds
    ``(returned usable, cut)`` of each answer that held more than asked. Returns
    ``{"requested_per_chunk", "chunks_over", "returned", "kept", "cut"}`` (of those chunks)."""
    returned, cut = sum(r for r, _ in surplus), sum(c for _, c in surplus)
    return {"requested_per_chunk": requested_per_chunk, "chunks_over": len(surplus), "returned": returned,
            "kept": returned - cut, "cut": cut}


def generation_warnings(summary: dict) -> list[str]:
    """The warning lines of a ``generation_summary.json``: fewer questions than asked
    (:func:`shortfall_warning`), more (``surplus``, :func:`generation_surplus`: the cut ones)."""
    lines = [w for w in [shortfall_warning(summary.get("shortfall"))] if w]
    s = summary.get(SURPLUS) or {}
    if s.get("cut"):
        lines.append(f"the generator returned more questions than asked: {s['chunks_over']} chunk(s) answered with "
                     f"{s['returned']} where {s['requested_per_chunk']} per chunk were asked; the first "
                     f"{s['requested_per_chunk']} of each were kept, {s['cut']} cut; see 'surplus' in generation_summary.json")
    return lines


def _write_outputs(out: str, datasets: list, dead: list, parquet: bool, counts: dict,
                   requested_per_chunk: Optional[int] = None, surplus: Sequence = ()) -> list[str]:
    """Write the sorted records (runs inside the pipeline, once). Returns the paths written."""
    import io

    from fair_forge_beam.io.write import OutputFiles, arrow_rows_table, sorted_dead_letters

    files = OutputFiles(out)
    records = [d for _, d in sorted(datasets, key=lambda t: t[0])]
    files.put_jsonl("dataset.jsonl", records)
    dead_sorted = sorted_dead_letters(dead)
    files.put_jsonl("dead_letter.jsonl", dead_sorted)
    if parquet:
        import pyarrow.parquet as pq

        buf = io.BytesIO()
        table = arrow_rows_table([_parquet_row(r) for r in records], _parquet_schema(), "dataset.parquet")
        pq.write_table(table, buf)
        files.put("dataset.parquet", buf.getvalue())
    summary = {"sessions": len(records), "interactions": sum(len(r["conversation"]) for r in records),
               "dead_letters": len(dead_sorted), **counts}
    if requested_per_chunk is not None:
        summary["shortfall"] = generation_shortfall(records, requested_per_chunk)
    if surplus:  # only when some answer held more than asked: a run without any writes the bytes it wrote before
        summary[SURPLUS] = generation_surplus(surplus, requested_per_chunk)
    files.put_json("generation_summary.json", summary)
    return files.written


_AGENTIC_FIELDS = (("chunk_id", "string"), ("difficulty", "string"), ("query_type", "string"), ("turn_number", "int64"),
                   ("conversation_mode", "bool_"), ("builds_on", "string"), ("expected_context", "string"))


def _parquet_schema():
    import pyarrow as pa

    agentic = pa.struct([(k, getattr(pa, t)()) for k, t in _AGENTIC_FIELDS])
    batch = pa.struct([("qa_id", pa.string()), ("query", pa.string()), ("assistant", pa.string()),
                       ("ground_truth_assistant", pa.string()), ("observation", pa.string()), ("agentic", agentic)])
    return pa.schema([("session_id", pa.string()), ("assistant_id", pa.string()), ("language", pa.string()),
                      ("context", pa.string()), ("conversation", pa.list_(batch))])


def _parquet_row(r: dict) -> dict:
    conv = [{**{k: b.get(k) for k in ("qa_id", "query", "assistant", "ground_truth_assistant", "observation")},
             "agentic": {k: (b.get("agentic") or {}).get(k) for k, _ in _AGENTIC_FIELDS}} for b in r["conversation"]]
    return {**{k: r[k] for k in ("session_id", "assistant_id", "language", "context")}, "conversation": conv}


def _write_once(_, datasets, dead, out, parquet, counts, requested_per_chunk=None, surplus=()):
    return _write_outputs(out, datasets, dead, parquet, counts, requested_per_chunk, surplus)


class WriteGenerated(beam.PTransform):
    """``{"datasets", "dead_letter"}`` → files in ``out``, written once by the pipeline:
    ``dataset.jsonl`` (one session per line, sorted by group index), ``dead_letter.jsonl``
    (sorted), ``generation_summary.json``, and with ``parquet`` ``dataset.parquet`` (one row per
    session, nested ``conversation``; ``agentic`` is a struct of the generator's fields, null where
    a record has none). With ``requested_per_chunk`` (the plan's ``num``) the
    summary holds ``shortfall`` (:func:`generation_shortfall`), and ``surplus``
    (:func:`generation_surplus`) when some answer held more than asked."""

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(self, out: str, parquet: bool = False, counts: Optional[dict] = None, requested_per_chunk: Optional[int] = None):
        super().__init__()
        self._out, self._parquet, self._counts = out, bool(parquet), dict(counts or {})
        self._per_chunk = None if requested_per_chunk is None else int(requested_per_chunk)

    def expand(self, outs):
        p = outs["datasets"].pipeline
        ds = outs["datasets"] | "GenDatasetsList" >> beam.combiners.ToList()
        dl = outs["dead_letter"] | "GenDeadList" >> beam.combiners.ToList()
        extra = outs[SURPLUS] if SURPLUS in outs else (p | "GenNoSurplus" >> beam.Create([]))
        sl = extra | "GenSurplusList" >> beam.combiners.ToList()
        return (p | "GenWriteOnce" >> beam.Create([None])
                | "GenWrite" >> beam.Map(_write_once, beam.pvalue.AsSingleton(ds), beam.pvalue.AsSingleton(dl),
                                         self._out, self._parquet, self._counts, self._per_chunk, beam.pvalue.AsSingleton(sl)))


# ----------------------------------------------------------------------------------------------
# Upstream-style API
# ----------------------------------------------------------------------------------------------
class Generator:
    """The original ``BaseGenerator`` over an OpenAI-compatible endpoint (spec §10).

    ``Generator(handler)`` with an ``OpenAIJudgeHandler`` (see :func:`generator_handler`), or
    ``Generator(model=..., base_url=..., use_structured_output=True, **handler_kwargs)``. Each
    method builds and runs a small Beam pipeline (FnApiRunner unless ``pipeline_args`` say
    otherwise); failures raise ``ValueError`` with the dead letter's reason (spec: "failures
    propagate")."""

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(self, handler=None, *, model: Optional[str] = None, base_url: Optional[str] = None,
                 use_structured_output: bool = True, pipeline_args: Sequence[str] = (), **handler_kwargs):
        if handler is None:
            if not model:
                raise ValueError("give a handler or a model name")
            handler = generator_handler(model, base_url, use_structured_output=use_structured_output, **handler_kwargs)
        self.handler = handler
        self.pipeline_args = checked_pipeline_args(pipeline_args)  # as the command line checks Beam's values

    def generate_queries(self, chunk: Chunk, num_queries: int = 3, seed_examples: Optional[Sequence[str]] = None,
                         custom_system_prompt: Optional[str] = None) -> GeneratedQueriesOutput:
        """``num_queries`` questions about ``chunk``. Raises ``ValueError`` when the answer is dead-lettered."""
        return GeneratedQueriesOutput.model_validate(self._one(chunk, num_queries, seed_examples, custom_system_prompt, False))

    def generate_conversation(self, chunk: Chunk, num_turns: int = 3, seed_examples: Optional[Sequence[str]] = None,
                              custom_system_prompt: Optional[str] = None) -> GeneratedConversationOutput:
        """A ``num_turns``-turn user conversation about ``chunk``. Raises ``ValueError`` when dead-lettered."""
        return GeneratedConversationOutput.model_validate(self._one(chunk, num_turns, seed_examples, custom_system_prompt, True))

    def _one(self, chunk, n, seed_examples, custom, conversation) -> dict:
        import tempfile

        from fair_forge_beam.components.judge.handler import RunJudge
        from fair_forge_beam.beam_pipeline import pipeline_options, run_pipeline
        from fair_forge_beam.io.write import read_jsonl_shards, write_jsonl

        plan = plan_requests([chunk], "generator", num_queries_per_chunk=n, seed_examples=seed_examples,
                             custom_system_prompt=custom, conversation_mode=conversation)
        with tempfile.TemporaryDirectory(prefix="fair_forge_gen_") as tmp:
            with run_pipeline(pipeline_options(self.pipeline_args)) as p:
                out = p | "Requests" >> beam.Create(list(plan.requests)) | "Ask" >> RunJudge(self.handler, label_prefix="Gen")
                write_jsonl(out.results | "ResultDicts" >> beam.Map(lambda r: r._asdict()), f"{tmp}/results", "Results")
                write_jsonl(out.dead_letters | "DeadDicts" >> beam.Map(lambda d: d._asdict()), f"{tmp}/dead", "Dead")
            dead, results = read_jsonl_shards(f"{tmp}/dead"), read_jsonl_shards(f"{tmp}/results")
        if dead or not results:
            raise ValueError(f"generation failed: {dead[0]['reason'] if dead else 'no answer'}")
        parsed = results[0]["parsed"]
        # repeated turn numbers, a blank or damaged turn, no usable question → ValueError; more than asked: cut
        kept, rejected, cut = generated_items(parsed, conversation, n)
        key = "turns" if conversation else "queries"
        if not kept:
            raise ValueError(f"generation failed: {_rejected_reason(rejected, len(parsed[key]), key)}")
        import logging

        for warning in ([_rejected_reason(rejected, len(parsed[key]), key)] if rejected else []) + generation_warnings(
                {SURPLUS: generation_surplus([(len(kept) + cut, cut)], n)}):
            logging.getLogger(__name__).warning("%s", warning)
        return {**parsed, key: kept}

    def _run(self, plan: GenerationPlan, out: str, parquet: bool) -> None:
        from fair_forge_beam.beam_pipeline import pipeline_options, run_pipeline

        with run_pipeline(pipeline_options(self.pipeline_args)) as p:
            outs = p | "Generate" >> GenerateDataset(self.handler, plan)
            outs | "Write" >> WriteGenerated(out, parquet, requested_per_chunk=plan.num)

    def generate_dataset(self, context_loader, source, assistant_id: str, num_queries_per_chunk: int = 3,
                         language: str = "english", seed_examples: Optional[Sequence[str]] = None,
                         custom_system_prompt: Optional[str] = None,
                         selection_strategy: Optional[BaseChunkSelectionStrategy] = None,
                         conversation_mode: bool = False, seed: int = 0) -> list:
        """Load ``source`` with ``context_loader``, group the chunks with ``selection_strategy``
        (default Sequential) and generate one :class:`~fair_forge_beam.schemas.common.Dataset` per
        group. Generation faults are dead-lettered (logged) and the sessions keep the chunks
        that worked; returns the datasets in group order."""
        import logging
        import tempfile

        from fair_forge_beam.schemas.common import Dataset

        chunks = context_loader.load(source)
        plan = plan_requests(chunks, assistant_id, num_queries_per_chunk=num_queries_per_chunk, language=language,
                             seed_examples=seed_examples, custom_system_prompt=custom_system_prompt,
                             selection_strategy=selection_strategy, conversation_mode=conversation_mode, seed=seed)
        with tempfile.TemporaryDirectory(prefix="fair_forge_gen_") as tmp:
            self._run(plan, tmp, parquet=False)
            for d in _read_jsonl(f"{tmp}/dead_letter.jsonl"):
                logging.getLogger(__name__).warning("generation dead letter: %s (%s)", d["reason"], d.get("element_id"))
            with open(f"{tmp}/generation_summary.json", encoding="utf-8") as f:
                summary = json.load(f)
            for warning in generation_warnings(summary):
                logging.getLogger(__name__).warning("%s", warning)
            return [Dataset.model_validate(r) for r in _read_jsonl(f"{tmp}/dataset.jsonl")]


def _read_jsonl(path: str) -> list:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
