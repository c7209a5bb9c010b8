"""Schemas of the generators (spec §10): the chunk a question is grounded in and the LLM's answers.

The output models forbid extra fields and are validated strictly by the judge handler
(:func:`~fair_forge_beam.components.judge.parsing.parse_verdict`): an answer that does not fit is
re-asked once, then dead-lettered with its raw text — never turned into a question.
"""
from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field

from fair_forge_beam.schemas.common import bounded_int

__all__ = ["Chunk", "GeneratedQuery", "GeneratedQueriesOutput", "ConversationTurn", "GeneratedConversationOutput"]


class Chunk(BaseModel):
    """A piece of a context document. ``chunk_id`` is unique within one load (see
    :class:`~fair_forge_beam.generators.loader.LocalMarkdownLoader`); ``metadata`` holds
    ``header``, ``chunking_method`` (``"header"`` / ``"size"``) and ``source_file``."""

    model_config = ConfigDict(extra="forbid")

    content: str
    chunk_id: str
    metadata: dict[str, Any] = Field(default_factory=dict)


class GeneratedQuery(BaseModel):
    """One generated question; ``difficulty`` / ``query_type`` are free labels from the LLM."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1)
    difficulty: Optional[str] = None
    query_type: Optional[str] = None


class GeneratedQueriesOutput(BaseModel):
    """The LLM's answer to a query-generation prompt: at least one question."""

    model_config = ConfigDict(extra="forbid")

    queries: list[GeneratedQuery] = Field(min_length=1)
    chunk_summary: str


#: a generated turn's number: 1 to 2**63-1, an integer (strict, as the reply is validated)
TurnNumber = bounded_int(1, strict=True)


class ConversationTurn(BaseModel):
    """One user turn of a generated conversation; ``turn_number`` from 1 to 2**63-1 (an int64 column of
    ``dataset.parquet``; trial49b B3: a reply's 10**29 crashed ``generate --parquet``), an integer, never
    ``true`` or text."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1)
    expected_context: Optional[str] = None
    difficulty: Optional[str] = None
    query_type: Optional[str] = None
    turn_number: TurnNumber


class GeneratedConversationOutput(BaseModel):
    """The LLM's answer to a conversation-generation prompt: at least one turn."""

    model_config = ConfigDict(extra="forbid")

    turns: list[ConversationTurn] = Field(min_length=1)
    conversation_summary: str
    chunk_summary: str
