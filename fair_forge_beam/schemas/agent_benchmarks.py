"""Records of the public agent benchmarks the agentic loaders read (:mod:`fair_forge_beam.io.agentic_sources`):
a τ-bench trajectory (:class:`TauRecord`) and BFCL's multi-turn question, answer and result records
(:class:`BfclQuestion`, :class:`BfclMissFuncQuestion`, :class:`BfclAnswer`, :class:`BfclResult`).

The models are strict, as the loaders map a record whole or not at all: text where text is mapped (``5`` is
never ``"5"``, ``null`` never ``""``), an integer is a bounded one (:func:`~fair_forge_beam.schemas.common.bounded_int`:
never ``true`` or ``"2"``), a message's ``role`` picks its model (another role is never left out), a turn is
never empty. Fields the loaders do not map are ignored. Each field's description says what a valid value is
and what the loader maps it to; :func:`record_problem` builds a dead letter's reason from it: the field's path
in the record, what the value is, and what it should be (``traj[5].content is null, not text (the turn's query)``).
"""
from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Optional, Union, get_args, get_origin

from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictStr, ValidationError,
                      model_validator)
from pydantic.fields import FieldInfo

from fair_forge_beam.blank import is_blank
from fair_forge_beam.plain import json_kind, validation_words
from fair_forge_beam.quoting import quoted
from fair_forge_beam.schemas.common import bounded_int

__all__ = ["TauRecord", "BfclQuestion", "BfclMissFuncQuestion", "BfclAnswer", "BfclResult", "record_problem",
           "validated"]


def _not_blank(value: str) -> str:
    if is_blank(value):
        raise ValueError("is blank")
    return value


#: text with a character that is not blank (a name, an id)
NonBlankText = Annotated[StrictStr, AfterValidator(_not_blank)]
#: an id as the benchmarks write it: an integer or non-blank text, kept as given (``3`` and ``"3"`` both read)
Key = Union[bounded_int(None, strict=True), NonBlankText]
#: a finite number: ``NaN`` and infinities are not (an integer stays one)
Number = Union[bounded_int(None, strict=True), Annotated[float, Field(strict=True, allow_inf_nan=False)]]


class _Record(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


def _text(mapped_to: str):
    return Field(description=f"text ({mapped_to})")


# ------------------------------------------------------------------ τ-bench

class TauFunction(_Record):
    """The function of an assistant's tool call."""

    name: NonBlankText = Field(description="non-blank text (the tool's name)")
    arguments: Union[StrictStr, dict[str, Any]] = Field(
        description="the call's arguments (JSON text or an object)")


class TauToolCall(_Record):
    """One tool call of an assistant message (OpenAI style)."""

    function: TauFunction = Field(description="an object ({name, arguments})")
    id: Optional[StrictStr] = Field(None, description="text (the id its tool result names)")


class TauSystem(_Record):
    """The system message: the session's context, before the first user message."""

    role: Literal["system"]
    content: StrictStr = _text("the session's context")


class TauUser(_Record):
    """A user message: it opens a turn."""

    role: Literal["user"]
    content: StrictStr = _text("the turn's query")


class TauAssistant(_Record):
    """An assistant message: its text (``null`` beside tool calls) and its tool calls."""

    role: Literal["assistant"]
    content: Optional[StrictStr] = Field(None, description="text (the assistant's answer, or null beside tool calls)")
    tool_calls: Optional[list[Annotated[TauToolCall, Field(description="a tool call object ({id, function})")]]] = \
        Field(None, description="a list of tool calls")


class TauTool(_Record):
    """A tool message: the result of the call it names."""

    role: Literal["tool"]
    tool_call_id: StrictStr = _text("the id of the call it answers")
    content: StrictStr = _text("the tool's result")


TauMessage = Annotated[Union[TauSystem, TauUser, TauAssistant, TauTool],
                       Field(discriminator="role", description="a message object")]


class TauAction(_Record):
    """One action of a task: a call the task expects."""

    name: NonBlankText = Field(description="non-blank text (the expected tool's name)")
    kwargs: dict[str, Any] = Field(description="an object of arguments")


class TauTask(_Record):
    actions: Optional[list[Annotated[TauAction, Field(description="an action object ({name, kwargs})")]]] = Field(
        None, description="a list of actions (the task's expected tools)")


class TauInfo(_Record):
    task: Optional[TauTask] = Field(None, description="an object (the task)")


_SESSION_KEY = "{path} is {kind}: the session id is built from task_id and trial (an integer or non-blank text)"


class TauRecord(_Record):
    """One τ-bench trajectory (``historical_trajectories/*.json``): the fields in the order they are checked."""

    task_id: Key = Field(description=_SESSION_KEY)
    trial: Key = Field(description=_SESSION_KEY)
    traj: list[TauMessage] = Field(description="a list of messages")
    info: Optional[TauInfo] = Field(None, description="an object (info.task.actions: the expected tools)")
    reward: Optional[Union[StrictBool, Number]] = Field(
        None, description="a finite number or true/false (the trajectory's reward, its label)")


# ------------------------------------------------------------------ BFCL

class BfclMessage(_Record):
    """A message of a question turn: only the user's (the turn's query)."""

    role: Literal["user"] = Field(
        description="'user' (the turn's query is its user messages: another role would be left out)")
    content: StrictStr = _text("the turn's query")


BfclMessages = list[Annotated[BfclMessage, Field(description="a message object ({role, content})")]]
BfclTurn = Annotated[BfclMessages, Field(
    min_length=1, description="a list of the turn's messages (a turn without a user message has no query)")]


class BfclQuestion(_Record):
    """A multi-turn question (``BFCL_v4_multi_turn_*.json``): one session, one turn per ``question`` element."""

    id: Key = Field(description="an integer or non-blank text")
    question: list[BfclTurn] = Field(min_length=1, description="a list of turns (one list of messages each)")
    involved_classes: Optional[list[Annotated[StrictStr, Field(description="an API class name (text)")]]] = Field(
        None, description="a list of API class names (text)")


#: the names of the functions BFCL holds back until a turn
FunctionNames = Annotated[list[Annotated[StrictStr, Field(description="a function name (text)")]],
                          Field(description="a list of function names (text)")]


class BfclMissFuncQuestion(BfclQuestion):
    """A ``multi_turn_miss_func`` question: ``missed_function`` names, by turn index, the functions BFCL holds
    back until that turn. Such a turn has no message of its own (``[]``: BFCL's model handler sends its own
    query there); every other turn has its messages, as in :class:`BfclQuestion`."""

    question: list[Annotated[BfclMessages, Field(description="a list of the turn's messages")]] = Field(
        min_length=1, description="a list of turns (one list of messages each)")
    missed_function: dict[str, FunctionNames] = Field(description="an object of turn index: held-out functions")

    @model_validator(mode="after")
    def _no_message_where_functions_are_added(self) -> "BfclMissFuncQuestion":
        turns = [str(i) for i in range(len(self.question))]
        for key in self.missed_function:
            if key not in turns:
                raise ValueError(f"missed_function names the turn {quoted(key)}, which the question does not have "
                                 f"(turns 0 to {len(turns) - 1})")
        for i, messages in enumerate(self.question):
            if not messages and turns[i] not in self.missed_function:
                raise ValueError(f"question[{i}] is an empty list, not a list of the turn's messages: missed_function "
                                 "adds no function at that turn (a turn without a user message has no query)")
            if messages and turns[i] in self.missed_function:
                raise ValueError(f"question[{i}] has messages at a turn where missed_function adds functions (BFCL "
                                 "gives that turn no message of its own)")
        return self


#: the calls of one turn: a list of call strings or objects, or of steps of them (``null`` is not "no call")
Calls = Annotated[list, Field(description="a list of calls (one list per turn)")]


class BfclAnswer(_Record):
    """An answer record (``possible_answer/…``): the ground truth of the question with its id, turn by turn."""

    #: the field of its turns
    TURNS: ClassVar[str] = "ground_truth"

    id: Union[StrictStr, bounded_int(None, strict=True)]
    ground_truth: list[Calls] = Field(description="a list (one entry per turn)")


class BfclResult(_Record):
    """A result record (a model's run): its calls for the question with its id, turn by turn."""

    TURNS: ClassVar[str] = "result"

    id: Union[StrictStr, bounded_int(None, strict=True)]
    result: list[Calls] = Field(description="a list (one entry per turn)")


# ------------------------------------------------------------------ reasons

def _bare(node: Any) -> tuple:
    """``(type, description, discriminator)`` of a type without its ``Annotated`` and ``Optional`` wrappers."""
    description = discriminator = None
    while True:
        if get_origin(node) is Annotated:
            node, *meta = get_args(node)
            for m in meta:
                if isinstance(m, FieldInfo):
                    description, discriminator = m.description or description, m.discriminator or discriminator
        elif get_origin(node) is Union and len(get_args(node)) == 2 and type(None) in get_args(node):
            node = next(a for a in get_args(node) if a is not type(None))
        else:
            return node, description, discriminator


def _kind(error: dict) -> str:
    """What the value of a validation error is: ``missing``, ``null``, ``text``, ``blank text``, ``'wizard'`` (text
    outside a fixed set), ``a number (5)``, ``an empty list``, ``an object`` …"""
    value = error.get("input")
    if error["type"] == "missing":
        return "missing"
    if isinstance(value, str):
        return quoted(value) if error["type"] == "literal_error" else "blank text" if is_blank(value) else "text"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{json_kind(value)} ({quoted(value, 40)})"
    return "an empty list" if value == [] else json_kind(value)


def record_problem(model: type[BaseModel], exc: ValidationError, of: str = "") -> str:
    """The reason of a record that ``model`` refuses (``exc``), from its first error: ``{path}{of} is {kind}, not
    {description}`` — the value's path in the record (``traj[5].content``), ``of`` (``" of 'q1'"``), what the
    value is (:func:`_kind`) and the description of the field or list item where it fails (a description with
    ``{path}`` is the whole reason's pattern). A bound's error is said in its validator's words (``trial: … is
    over the largest value read …``); a message whose ``role`` is none of its union's is ``traj[4] has role
    'function', not one of system, user, assistant, tool``."""
    error = exc.errors(include_url=False)[0]
    node, what, path = model, "a valid value", ""
    for key in error["loc"]:
        node, description, discriminator = _bare(node)
        what = description or what
        if isinstance(key, int) and get_origin(node) is list:
            node, path = get_args(node)[0], f"{path}[{key}]"
        elif get_origin(node) is dict:  # a key of an object's: its value
            node, path = get_args(node)[1], f"{path}[{quoted(key)}]"
        elif discriminator:  # a tagged union: the member of the key's tag
            node = next(m for m in get_args(node) if key in get_args(m.model_fields[discriminator].annotation))
        elif isinstance(node, type) and issubclass(node, BaseModel) and key in node.model_fields:
            field = node.model_fields[key]
            node, path = Annotated[field.annotation, field], f"{path}.{key}" if path else key
        else:  # a member of a union: the value is the union's
            break
    node, description, discriminator = _bare(node)
    what, path = description or what, path + of
    if error["type"] in ("union_tag_invalid", "union_tag_not_found"):
        tags = ", ".join(get_args(m.model_fields[discriminator].annotation)[0] for m in get_args(node))
        value = error["input"].get(discriminator, None) if isinstance(error["input"], dict) else None
        return f"{path} has {discriminator} {quoted(value)}, not one of {tags}"
    if error["type"] == "value_error" and not isinstance(error.get("input"), str):  # a validator's words
        return f"{path}: {error['ctx']['error']}" if path else str(error["ctx"]["error"])
    return what.format(path=path, kind=_kind(error)) if "{path}" in what else f"{path} is {_kind(error)}, not {what}"


def validated(model: type[BaseModel], record: Any, of: str = "") -> Any:
    """``record`` read by ``model``; raises ``ValueError`` with :func:`record_problem`'s reason when it refuses it
    (the loader's dead letter)."""
    try:
        return model.model_validate(record)
    except ValidationError as exc:
        try:
            reason = record_problem(model, exc, of)
        except Exception:  # noqa: BLE001 - an error these models do not give: said in the general words
            reason = validation_words(exc, limit=1)
        raise ValueError(reason) from None
