"""The mapping form of an LLM component's arguments — a judged metric's ``judge={...}``
(:func:`fair_forge_beam.metrics.judged.build_judge`) and a guardian's ``guardian={...}``
(:func:`fair_forge_beam.components.guardian.guardian_from_mapping`): every key and every value is
checked against what the class takes before the class sees it, so that a bad one is one
``ValueError`` naming the key and what it expects, never the value. A value in the wrong key may be
a secret (fix38a: ``{"model": "m", "temperature": "sk-live-…"}`` raised Python's own ``could not
convert string to float: 'sk-live-…'``; ``{"max_tokens": "many"}`` an ``invalid literal for int()``).

What a key expects is read from the class's own signature (its annotations), so a new argument is
checked without a table to keep. The class's own range checks (``max_tokens must be >= 1``) still
speak, with any text given in the mapping cut out of their message (:func:`construct`).
"""
from __future__ import annotations

import collections.abc as abc
import typing
from typing import Any, Callable, Mapping

from fair_forge_beam.arguments import a_type, check_arguments, check_values, expects, fits, keyword_annotations, masked_key
from fair_forge_beam.blank import is_blank

#: keyword_annotations, expects, fits, check_values, check_arguments, masked_key and a_type live in
#: :mod:`fair_forge_beam.arguments` (every public constructor's check) and are named here as before
__all__ = ["SECRET_KEYS", "key_hint", "keyword_annotations", "expects", "fits", "check_keys", "check_values", "check_arguments",
           "masked_key", "a_type", "SAMPLING_PARAMETERS", "check_sampling",
           "inference_arguments", "construct"]

#: mapping keys that would hold a secret: refused, the key's value never shown (it is read from the
#: environment variable ``api_key_env`` names)
SECRET_KEYS = ("api_key", "apikey", "key", "token", "password", "secret", "authorization")


def key_hint(key: Any, valid) -> str:
    """``"; did you mean 'api_key_env'?"`` (:func:`~fair_forge_beam.quoting.did_you_mean`), and for a key
    that would hold a secret where the key comes from instead."""
    from fair_forge_beam.quoting import did_you_mean

    hint = did_you_mean(key, valid) if isinstance(key, str) else ""
    if isinstance(key, str) and key.lower().replace("-", "_") in SECRET_KEYS:
        hint += " (an API key is never given as a value: it is read from the environment variable api_key_env names)"
    return hint


def check_keys(what: str, kwargs: Mapping, takes: Mapping[str, Any], owner: str, also: tuple = ()) -> None:
    """Refuse a key of ``kwargs`` that ``takes`` (``{keyword: annotation}``, :func:`keyword_annotations`)
    has not.

    Args:
        what: the mapping's name in messages (``"judge mapping"``).
        owner: the class's name in messages.
        also: keys the mapping form takes besides ``owner``'s (``kind``): named in the list, not checked.

    Raises:
        ValueError: one line naming the key and the nearest that ``owner`` takes (never its value).
    """
    for key in kwargs:
        if key not in takes:
            shown = masked_key(key)
            raise ValueError(f"{what}: {shown} is not an argument of {owner}{key_hint(key, takes)} (it takes "
                             f"{', '.join([*also, *sorted(takes)])})")


#: the OpenAI chat-completions sampling parameters whose type is known: a judge's ``params``, an assistant's
#: ``params`` and a metric's ``inference_args`` give each as declared here (any other key is the server's to judge)
SAMPLING_PARAMETERS: dict = {
    "temperature": float, "top_p": float, "max_tokens": int, "max_completion_tokens": int, "seed": int,
    "presence_penalty": float, "frequency_penalty": float, "logprobs": bool, "top_logprobs": int,
    "stop": typing.Union[str, list[str], None], "logit_bias": typing.Optional[typing.Mapping[str, float]],
    "extra_body": typing.Optional[typing.Mapping[str, Any]], "user": str, "reasoning_effort": str,
}


def check_sampling(what: str, params: Any) -> None:
    """Refuse sampling parameters ``params`` (None or a mapping) whose known keys (:data:`SAMPLING_PARAMETERS`)
    hold a value of the wrong type — ``{"temperature": "sk-…"}`` was sent, and the server's HTTP 400, which
    may echo the value, went into the dead letter (trial38b B12) — naming the key, never the value.

    Raises:
        ValueError: ``params`` is no mapping, or a key of it is not a text, or a value does not fit.
    """
    if params is None:
        return
    if not isinstance(params, abc.Mapping):
        raise ValueError(f"{what} must be a mapping of sampling parameters, got {a_type(params)}")
    for key in params:
        if not isinstance(key, str):
            raise ValueError(f"{what}: {masked_key(key)} is not a parameter name (a text)")
    check_values(what, params, SAMPLING_PARAMETERS)


def inference_arguments(inference_args: Any) -> Any:
    """A metric's ``inference_args`` as it keeps them: checked (:func:`check_sampling`), a dict, or None for none."""
    check_sampling("inference_args", inference_args)
    return dict(inference_args) if inference_args else None


def construct(factory: Callable, *args: Any, **kwargs: Any) -> Any:
    """``factory(*args, **kwargs)``; a ``ValueError`` / ``TypeError`` it raises (its own range
    checks: ``max_tokens must be >= 1``) becomes one ``ValueError`` with the same message, but every
    text given as a value (of three characters or more and not blank, in mappings and lists too) cut
    out of it (and the whole message left out if a long text's start is still in it: a value shown
    cut, ``'sk-…' (90 characters)``), and no chained traceback that would show it."""
    try:
        return factory(*args, **kwargs)
    except (ValueError, TypeError) as exc:
        message = str(exc)
        texts = sorted({t for t in _texts([args, list(kwargs.values())]) if not is_blank(t)}, key=len, reverse=True)
        for text in texts:
            for form in (repr(text), repr(text)[1:-1], text):
                if len(form) >= 3:
                    message = message.replace(form, "<a value given>")
        if any(len(t) >= 8 and t[:8] in message for t in texts):
            message = f"{type(exc).__name__}, its message not shown: it quoted a value given"
        raise ValueError(message) from None


def _texts(value: Any, depth: int = 0):
    """Every string value in ``value`` (mappings' values, sequences' items), a few levels deep."""
    if isinstance(value, str):
        yield value
    elif depth < 6 and isinstance(value, abc.Mapping):
        for v in value.values():
            yield from _texts(v, depth + 1)
    elif depth < 6 and isinstance(value, (list, tuple, set, frozenset)):
        for v in value:
            yield from _texts(v, depth + 1)
