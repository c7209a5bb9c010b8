"""Per-interaction Parquet schema derived from the pydantic result schemas (issue 14 item 3).

``results.parquet``'s columns come from the metrics' result models through
:mod:`fair_forge_beam.schemas.arrow`; the union schema of all metrics is pinned here to the
hand-written schema it replaced (main 0b08c4c), field by field, nullability included.
"""
from __future__ import annotations

import typing
from typing import Literal, Optional

import pyarrow as pa
import pytest
from pydantic import BaseModel

from fair_forge_beam.metrics.registry import METRICS, interaction_parquet_fields
from fair_forge_beam.schemas.arrow import arrow_fields, arrow_type

#: results.parquet's union schema of every metric as main 0b08c4c wrote it (hand-written then)
PINNED = [
    ('metric', 'string'),
    ('element_id', 'string'),
    ('session_id', 'string'),
    ('assistant_id', 'string'),
    ('language', 'string'),
    ('turn_index', 'int64'),
    ('qa_id', 'string'),
    ('humanity_assistant_emotional_entropy', 'double'),
    ('humanity_ground_truth_spearman', 'double'),
    ('humanity_has_reference', 'bool'),  # issue 28: the rows the Spearman means rest on
    ('humanity_assistant_anger', 'double'),
    ('humanity_assistant_anticipation', 'double'),
    ('humanity_assistant_disgust', 'double'),
    ('humanity_assistant_fear', 'double'),
    ('humanity_assistant_joy', 'double'),
    ('humanity_assistant_sadness', 'double'),
    ('humanity_assistant_surprise', 'double'),
    ('humanity_assistant_trust', 'double'),
    ('toxicity_total_words', 'int64'),
    ('toxicity_toxic_words', 'int64'),
    ('toxicity_toxic_ratio', 'double'),
    ('toxicity_is_toxic', 'bool'),
    ('toxicity_matched', 'list<item: string>'),
    ('toxicity_groups', 'list<item: string>'),
    ('toxicity_sentiment', 'double'),
    ('bias_guardian_interactions', 'list<item: struct<qa_id: string, attribute: string, is_biased: bool, certainty: double, element_id: string>>'),
    ('bias_failed_attributes', 'list<item: string>'),
    ('context_awareness', 'double'),
    ('insight', 'string'),
    ('reasoning', 'string'),
    ('conversational_memory', 'double'),
    ('conversational_language', 'double'),
    ('conversational_quality_maxim', 'double'),
    ('conversational_quantity_maxim', 'double'),
    ('conversational_relation_maxim', 'double'),
    ('conversational_manner_maxim', 'double'),
    ('conversational_sensibleness', 'double'),
    ('history_turns', 'int64'),
    ('regulatory_compliance_score', 'double'),
    ('regulatory_verdict', 'string'),
    ('regulatory_supporting_chunks', 'int64'),
    ('regulatory_contradicting_chunks', 'int64'),
    ('regulatory_irrelevant_chunks', 'int64'),
    ('regulatory_retrieved_chunks', 'list<item: struct<text: string, source: string, chunk_index: int64, similarity: double, checker_score: double, verdict: string, insight: string>>'),
    ('agentic_task_id', 'string'),
    ('agentic_correctness_source', 'string'),
    ('agentic_correctness_score', 'double'),
    ('agentic_is_correct', 'bool'),
    ('agentic_tool_correctness', 'struct<tool_selection_accuracy: double, parameter_accuracy: double, sequence_correct: double, result_utilization: double, overall_correctness: double, is_correct: bool, reasoning: string>'),
    ('bestof_block_id', 'string'),
    ('bestof_round', 'int64'),
    ('bestof_left_id', 'string'),
    ('bestof_right_id', 'string'),
    ('bestof_winner_id', 'string'),
    ('bestof_confidence', 'double'),
    ('bestof_verdict', 'string'),
    ('bestof_judged', 'bool'),
    ('vision_similarity_score', 'double'),
    ('vision_is_hallucination', 'bool'),
    ('prompt_evaluator_csr', 'double'),
    ('prompt_evaluator_stability', 'double'),
    ('prompt_evaluator_semantic_entropy', 'double'),
    ('prompt_evaluator_rss', 'double'),
    ('prompt_evaluator_icr', 'double'),
    ('prompt_evaluator_jq', 'double'),
    ('prompt_evaluator_n_clusters', 'int64'),
    ('prompt_evaluator_n_samples', 'int64'),
    # privacy and role adherence (issue 17): their interaction records
    ('privacy_detected', 'string'),
    ('privacy_leaked', 'bool'),
    ('privacy_expected', 'int64'),
    ('privacy_tp', 'int64'),
    ('privacy_fp', 'int64'),
    ('privacy_fn', 'int64'),
    ('role_adherent', 'bool'),
    ('role_adherence_score', 'double'),
    ('role_reason', 'string'),
]


def test_union_schema_equals_the_hand_written_one():
    schema = interaction_parquet_fields(list(METRICS))
    assert [(f.name, str(f.type)) for f in schema] == PINNED
    assert all(f.nullable for f in schema)  # a row of one metric leaves the other metrics' columns empty


def _children_nullable(t: pa.DataType) -> list[bool]:
    if pa.types.is_list(t):
        return [t.value_field.nullable, *_children_nullable(t.value_type)]
    if pa.types.is_struct(t):
        return [b for f in t for b in (f.nullable, *_children_nullable(f.type))]
    return []


def test_nested_fields_stay_nullable_as_before():
    schema = interaction_parquet_fields(list(METRICS))
    for name in ("bias_guardian_interactions", "regulatory_retrieved_chunks", "agentic_tool_correctness"):
        assert all(_children_nullable(schema.field(name).type)), name


def test_one_metric_schema_is_the_base_plus_its_columns():
    base = [f.name for f in interaction_parquet_fields([])]
    assert base == [n for n, _ in PINNED[:7]]
    tox = [f.name for f in interaction_parquet_fields(["toxicity"])]
    assert tox == base + [n for n, _ in PINNED if n.startswith("toxicity_")]
    # a column two metrics share ("insight" of context and conversational) appears once
    names = [f.name for f in interaction_parquet_fields(["context", "conversational", "regulatory"])]
    assert names.count("insight") == 1 and names.count("reasoning") == 1


class _Inner(BaseModel):
    a: int
    b: Optional[str] = None


class _Outer(BaseModel):
    x: float
    y: Optional[float] = None
    flag: bool
    tags: list[str]
    kind: Literal["A", "B"]
    inner: Optional[_Inner] = None
    inners: list[_Inner]
    counts: dict[str, int]


def test_type_mapping():
    fields = {f.name: f for f in arrow_fields(_Outer, ["x", "y", "flag", "tags", "kind", "inner", "inners"])}
    assert fields["x"].type == pa.float64() and not fields["x"].nullable
    assert fields["y"].type == pa.float64() and fields["y"].nullable
    assert fields["flag"].type == pa.bool_()
    assert fields["tags"].type == pa.list_(pa.string())
    assert fields["kind"].type == pa.string()
    assert fields["inner"].nullable
    assert fields["inner"].type == pa.struct([pa.field("a", pa.int64(), nullable=False), pa.field("b", pa.string())])
    assert fields["inners"].type == pa.list_(fields["inner"].type)
    assert all(f.nullable for f in arrow_fields(_Outer, ["x", "inner"], prefix="p_", all_nullable=True))
    assert [f.name for f in arrow_fields(_Outer, ["x", "flag"], prefix="p_")] == ["p_x", "p_flag"]


def test_unmappable_fields_raise():
    # dict[K, V] is a map column since issue 27 (typed session outputs); a bare dict has no type
    assert arrow_fields(_Outer, ["counts"])[0].type == pa.map_(pa.string(), pa.int64())
    with pytest.raises(TypeError, match="no Arrow column type"):
        arrow_type(dict)
    with pytest.raises(TypeError):
        arrow_type(typing.Any)
    with pytest.raises(KeyError, match="no field 'nope'"):
        arrow_fields(_Outer, ["nope"])


def test_columns_decode_as_each_value_does():
    """from_arrow_array (the roll-up's column-wise decoding of stored statistics) gives, row by
    row, what from_arrow_value of each to_pylist value gives: nulls at every level, a sliced
    array (its offset), several chunks, maps, lists of structs of lists."""
    from fair_forge_beam.schemas.arrow import from_arrow_array, from_arrow_value

    t = pa.list_(pa.struct([("turn_index", pa.int64()), ("w", pa.float64()), ("counts", pa.list_(pa.int64())),
                            ("m", pa.map_(pa.int64(), pa.int64())), ("s", pa.string())]))
    rows = [
        [(0, 1.5, [1, 2], {3: 4}, "a"), (1, None, [], {}, None)],
        None,
        [],
        [None, (2, 0.25, None, None, "é")],
        [(5, -0.0, [7], {1: 1, 2: None}, "")],
    ]
    arr = pa.array(rows, type=t)
    want = [from_arrow_value(v, t) for v in arr.to_pylist()]
    assert want[0] == ((0, 1.5, (1, 2), {3: 4}, "a"), (1, None, (), {}, None))  # the plain form
    assert from_arrow_array(arr) == want
    assert from_arrow_array(arr.slice(1, 3)) == want[1:4]
    assert from_arrow_array(pa.chunked_array([arr.slice(0, 2), arr.slice(2)])) == want
    st = pa.struct([("a", pa.int64()), ("b", pa.map_(pa.string(), pa.int64()))])
    sarr = pa.array([{"a": 1, "b": [("x", 2)]}, None, {"a": None, "b": None}], type=st)
    assert from_arrow_array(sarr) == [from_arrow_value(v, st) for v in sarr.to_pylist()] == [(1, {"x": 2}), None, (None, None)]
