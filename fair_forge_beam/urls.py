"""Credentials in URLs (issue 28, trial 28e B2): the one place that masks them, and the split of an
endpoint's base URL into its root and its query.

:func:`mask_url_secrets` is what every recorder goes through (:func:`fair_forge_beam.io.secrets.scrub`
for every file we write and every text a page or the console shows; the log record factory
:func:`install_log_masking` for every log line, the HTTP clients' request
lines included; :func:`fair_forge_beam.console.say` and the usage-error line): a URL's user name and
password (``http://user:password@host`` → ``http://***@host``) and the values of query parameters
whose name says they hold a secret (``?api-key=…`` → ``?api-key=***``) are masked, in any text,
plain or JSON-escaped (``http:\\/\\/``) or HTML-escaped (``&amp;``). Also here, light as this module is (a
log line is masked while Beam itself is imported): :func:`mask_shapes`, secret-shaped strings.
"""
from __future__ import annotations

import re
import threading
from typing import Optional
from urllib.parse import parse_qsl, urlsplit, urlunsplit

__all__ = ["mask_url_secrets", "SECRET_PARAM_WORDS", "split_query", "has_userinfo", "mask_line", "install_log_masking",
           "SECRET_SHAPES", "mask_shapes"]

#: a query parameter one of whose name's words (split at ``- _ . [ ]``, digits and camelCase; any
#: case) is one of these holds a secret: its value is masked (``api-key``, ``apikey``,
#: ``access_token``, ``accessToken``, ``X-Amz-Signature``, ``client_secret``, ``sig``, ``session_id``
#: …). Whole words, so the data's own ``?keyword=``, ``?author=`` or ``?monkey=`` stay as written
SECRET_PARAM_WORDS = frozenset({"key", "apikey", "token", "sig", "signature", "password", "passwd", "pwd",
                                "secret", "auth", "authorization", "credential", "credentials", "session",
                                "sessionid", "sid"})

_MASK = "***"
#: ``scheme://userinfo@``: the scheme's slashes plain or JSON-escaped (``:\\/\\/``); the userinfo is
#: what stands before the first ``@`` of the authority (no ``/ ? #``, whitespace or quotes)
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*:(?:\\*/){2})([^/?#@\s\"'<>\\]+)@")
#: ``?name=value`` / ``&name=value`` / ``;name=value`` (also ``&amp;name=``); the value ends at the
#: next ``& # ;``, whitespace, a quote, ``<``, ``>`` or a backslash. A parameter is masked when its
#: name holds a word of :data:`SECRET_PARAM_WORDS` (:func:`_secret_name`)
_PARAM = re.compile(r"([?&;][A-Za-z0-9_.\-\[\]]+=)([^&#;\s\"'<>\\]+)")
_NAME_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")


def _secret_name(name: str) -> bool:
    """Whether a query parameter's ``name`` has a word of :data:`SECRET_PARAM_WORDS`."""
    return any(w.lower() in SECRET_PARAM_WORDS for w in _NAME_WORDS.findall(name))


def _param(m: "re.Match") -> str:
    return m.group(1) + _MASK if _secret_name(m.group(1)) else m.group(0)


_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-[]")


def _secret_param_at_an_equals(text: str) -> bool:
    """Whether some ``=`` of ``text`` ends a secret parameter's name (``?api-key=``): a look behind
    each ``=`` (a text holds few), much cheaper than a regular expression over the whole text."""
    at = text.find("=")
    while at > 0:
        start = at - 1
        while start >= 0 and text[start] in _NAME_CHARS and at - start <= 64:
            start -= 1
        if start >= 0 and start < at - 1 and text[start] in "?&;" and _secret_name(text[start + 1:at]):
            return True
        at = text.find("=", at + 1)
    return False


def mask_url_secrets(text: str) -> str:
    """``text`` with every URL's user name and password and the value of every query parameter
    named as a secret (:data:`SECRET_PARAM_WORDS`) replaced by ``***``; the same object when it holds
    neither (a few substring tests first: the common case). Never raises."""
    if not isinstance(text, str):
        return text
    out = text
    if "@" in out and "/" in out:
        out = _USERINFO.sub(lambda m: m.group(1) + _MASK + "@", out)
    if "=" in out and ("?" in out or "&" in out or ";" in out) and _secret_param_at_an_equals(out):
        out = _PARAM.sub(_param, out)
    return text if out == text else out


#: secrets told by their shape alone (trial33 O1): masked in what is shown to a person
#: (:func:`fair_forge_beam.io.secrets.scrub_shown`: report pages; :func:`mask_line`: every console and log line), whatever the environment holds — a key of a
#: service this run never heard of, planted in or leaked into the data. Each is a well-known
#: credential format, long enough not to be ordinary text: a PEM private key block (up to its END
#: line, or to the text's end when the text was cut), an OpenAI/Anthropic/Stripe-style ``sk-``/``rk_``
#: key (20 characters or more after the prefix, letters and a digit among them), an AWS access key id
#: (``AKIA``/``ASIA`` and 16 capitals or digits), GitHub (``ghp_`` …, ``github_pat_``), Slack
#: (``xoxb-`` …), Google (``AIza`` and 35), Hugging Face / Groq / GitLab (``hf_``, ``gsk_``,
#: ``glpat-`` and 20 or more, a digit among them) tokens. Not told: keys without such a prefix (a hex
#: or base64 string is also ordinary data), which only the key values of :func:`fair_forge_beam.io.secrets.known_secrets` mask
SECRET_SHAPES = re.compile(
    r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY-----(?:.*?-----END[A-Z0-9 ]{0,40}PRIVATE KEY-----|.*)"
    r"|(?<![A-Za-z0-9_-])(?:sk|rk)[-_](?=[A-Za-z0-9_-]*[0-9])(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{20,}"
    r"|(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Za-z])"
    r"|(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})"
    r"|(?<![A-Za-z0-9_])xox[abposr]-[A-Za-z0-9-]{10,}"
    r"|(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}"
    r"|(?<![A-Za-z0-9_-])(?:hf_|gsk_|glpat-)(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{20,}", re.S)
#: texts one of which every match of :data:`SECRET_SHAPES` holds (looked for first: most texts hold none)
_SHAPE_NEEDLES = ("-----BEGIN", "sk-", "sk_", "rk-", "rk_", "AKIA", "ASIA", "gh", "github_pat_", "xox", "AIza",
                  "hf_", "gsk_", "glpat-")


def mask_shapes(text: str) -> str:
    """``text`` with every secret-shaped string (:data:`SECRET_SHAPES`) replaced by ``***``; the
    same object when it holds none. Never raises."""
    if not isinstance(text, str) or not any(n in text for n in _SHAPE_NEEDLES):
        return text
    out = SECRET_SHAPES.sub(_MASK, text)
    return text if out == text else out


def has_userinfo(url: str) -> bool:
    """Whether ``url`` names a user or a password (``http://user:password@host``)."""
    try:
        parts = urlsplit(str(url))
        return parts.username is not None or parts.password is not None
    except ValueError:
        return "@" in str(url).split("/", 3)[2] if str(url).count("/") >= 2 else False


def split_query(url: Optional[str]) -> tuple:
    """``(root, query)``: ``url`` without its query string and fragment, and its query parameters as
    a dict (``{}`` for none). An OpenAI client joins its base URL and the endpoint's path as text:
    ``http://h/v1?api-key=K`` sent its requests to ``/v1/?api-key=Kchat/completions`` (trial 28e B2);
    the client is given the root and the parameters (``default_query``), so every request keeps them
    intact. ``None`` → ``(None, {})``."""
    if url is None:
        return None, {}
    parts = urlsplit(url)
    if not parts.query and not parts.fragment:
        return url, {}
    return urlunsplit(parts._replace(query="", fragment="")), dict(parse_qsl(parts.query, keep_blank_values=True))


def mask_line(text: str) -> str:
    """One line we print or log with the credentials of every URL masked
    (:func:`mask_url_secrets`) and every secret-shaped string (a PEM private key, ``sk-…``, ``AKIA…``:
    :func:`mask_shapes`, trial33 O1: a line quoting the data shows it to a
    person). The values of the key variables are masked
    where a line is composed (a page's or the console table's text: :func:`~fair_forge_beam.io.secrets.scrub_known_text`, which
    keeps the names; masking them here again would mask a field name equal to a key). Never raises."""
    try:
        if not isinstance(text, str):
            return text
        out = mask_url_secrets(text)
        shown = mask_shapes(out)
        return out if shown is out else shown
    except Exception:  # noqa: BLE001 - masking must never stop a line; a line that cannot be read is dropped whole
        return _MASK


_FACTORY_LOCK = threading.Lock()


def install_log_masking() -> None:
    """Make every log record of this process masked by :func:`mask_line` when it is created (a log
    record factory: every logger and every handler, Beam's and the HTTP clients' included — httpx
    logs each request's URL at INFO, trial 28e B2); the message is formatted then, and an exception's
    text too. Installed once per process; idempotent."""
    import logging

    with _FACTORY_LOCK:
        previous = logging.getLogRecordFactory()
        if getattr(previous, "_fair_forge_masking", False):
            return

        def factory(*args, **kwargs):
            record = previous(*args, **kwargs)
            try:
                message = record.getMessage()
            except Exception:  # noqa: BLE001 - a record whose arguments do not fit stays as it is
                return record
            masked = mask_line(message)
            if masked is not message:  # else msg and args stay: filters read them (Beam's retries in one line)
                record.msg, record.args = masked, None
            if record.exc_info and record.exc_info[0] is not None:
                text = logging.Formatter().formatException(record.exc_info)
                shown = mask_line(text)
                if shown is not text:
                    record.exc_text = shown
            return record

        factory._fair_forge_masking = True
        logging.setLogRecordFactory(factory)
