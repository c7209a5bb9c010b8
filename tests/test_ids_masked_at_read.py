"""Issue 28, item 5 ("never write a key"): record ids are masked once, where records are read.

A session, qa or assistant id (or a language, or a metadata slice value) that holds a secret the run
uses was masked by the writers at the end, but the names built from it were not: ``assistant_id=<id>``
in results.json and its dict keys, report.html, gates.json, a roll-up's ``assistant_id=***``. The
reader (``io.read._ParseRecord``, which every input format and command goes through) now masks every
id field: ``s-<key>`` becomes ``s-***~<tag>``, the tag a keyed hash of the whole original id (same on
every runner; two ids that mask to the same text stay two sessions).

Every test writes the key plain, JSON-escaped (``\\u0073k-…`` as the id's own characters) and inside
a longer id, then walks every file of the output folder (Parquet files decoded too: their pages are
compressed) and finds the key nowhere.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from helpers import FNAPI, for_its_mode

ENV, ENV2 = "FFB_IDS_KEY", "FFB_IDS_KEY2"
KEY = "sk-ids-0123456789abcdef0123"  # >= 16 characters: masked loosely (any case, spaced out) too
KEY2 = "sk-ids-fedcba9876543210fedc"
#: the key JSON-escaped inside the id's own text (its first three characters as \\uXXXX escapes)
ESCAPED = "".join(f"\\u{ord(c):04x}" for c in KEY[:3]) + KEY[3:]
TAG = re.compile(r"\*\*\*.*~[0-9a-f]{12}$")


@pytest.fixture
def keys(monkeypatch):
    """The run's secrets: two key variables registered as a judge or an assistant registers its own."""
    from fair_forge_beam.io import secrets as sec

    monkeypatch.setattr(sec, "_ENVS", set())
    monkeypatch.setattr(sec, "_ENVS_SNAPSHOT", frozenset())
    monkeypatch.delenv(sec.NAMES_ENV, raising=False)
    monkeypatch.setenv(ENV, KEY)
    monkeypatch.setenv(ENV2, KEY2)
    sec.register_secret_env(ENV)
    sec.register_secret_env(ENV2)


def _turn(qa_id: str, answer: str = "I am glad to help, thank you.") -> dict:
    return {"qa_id": qa_id, "query": "Can you help?", "assistant": answer, "ground_truth_assistant": "Happy to help."}


def _sessions() -> list[dict]:
    """Sessions whose ids hold the keys: plain, JSON-escaped, inside a longer id; two sessions whose
    ids mask to the same text (``s-<KEY>`` and ``s-<KEY2>``; ``s-<KEY>`` and ``s-<ESCAPED>``); an
    interaction rejected at read (a dead letter naming its element id) and an empty answer (a
    warning naming its qa id)."""
    return [
        {"session_id": f"s-{KEY}", "assistant_id": KEY, "language": "english", "region": f"eu-{KEY}",
         "conversation": [_turn(KEY), _turn(f"q-{ESCAPED}"), _turn(f"q-{KEY}-2", "")]},
        {"session_id": f"s-{KEY2}", "assistant_id": KEY, "language": "english", "region": "eu",
         "conversation": [_turn("q1"), _turn("q2")]},
        {"session_id": f"s-{ESCAPED}", "assistant_id": f"bot-{ESCAPED}", "language": "english", "region": "eu",
         "conversation": [_turn(f"{KEY}"), _turn("q2"), {"qa_id": f"bad-{KEY}", "query": 3}]},
        {"session_id": "plain", "assistant_id": f"team/{KEY}/v2", "language": "english", "region": "us",
         "conversation": [_turn("q1"), _turn("q2")]},
        {"session_id": "clean", "assistant_id": "bot-clean", "language": "english", "region": "us",
         "conversation": [_turn("q1"), _turn("q2")]},
        {"session_id": "lang", "assistant_id": "bot-clean", "language": KEY, "region": "us",  # a language is read too
         "conversation": [_turn("q1")]},
    ]


def _write(path: Path, sessions: list[dict]) -> Path:
    path.write_text("".join(json.dumps(s) + "\n" for s in sessions), encoding="utf-8")
    return path


def _leaks(folder: Path) -> list:
    """Every file under ``folder`` that holds a key (its bytes, and for Parquet its decoded rows
    and metadata), with what it holds."""
    needles = [k for k in (KEY, KEY2, ESCAPED, KEY[3:]) if k]
    out = []
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        texts = [f.read_bytes().decode("utf-8", "replace")]
        if f.suffix == ".parquet":
            pf = pq.ParquetFile(f)
            texts += [json.dumps(pf.read().to_pylist(), default=str, ensure_ascii=False),
                      str(pf.schema_arrow.metadata or {})]
        out += [(str(f.relative_to(folder)), n) for n in needles for t in texts if n in t]
    return out


def _audit(data: Path, out: Path, *extra) -> dict:
    from pipelines import audit

    return audit.run(for_its_mode(["--metrics", "humanity", "--input", str(data), "--output", str(out), "--mc-samples", "200",
                                   "--seed", "3", "--slices", "assistant_id,region", "--gate",
                                   "humanity mean_entropy mean >= 0 in every assistant_id", f"--runner={FNAPI}", *extra]))


def _slice_ids(doc: dict, dim: str) -> set:
    return {s["slice"].split("=", 1)[1] for s in doc["metrics"]["humanity"]["slices"]
            if s["slice"].startswith(dim + "=")}


@pytest.mark.slow
def test_an_audit_masks_ids_once_and_writes_no_key_anywhere(keys, tmp_path, capsys):
    data = _write(tmp_path / "in.jsonl", _sessions())
    out = tmp_path / "out"
    doc = _audit(data, out)
    stdout = capsys.readouterr().out
    assert KEY not in stdout and KEY2 not in stdout and ESCAPED not in stdout
    assert _leaks(out) == []
    # the slice names and the stored statistics hold the same masked ids, all distinct
    assistants = _slice_ids(doc, "assistant_id")
    assert "bot-clean" in assistants and len(assistants) == 4, assistants
    masked = assistants - {"bot-clean"}
    assert all(TAG.search(a) for a in masked) and {a[:4] for a in masked} == {"***~", "bot-", "team"}
    assert any(re.fullmatch(r"team/\*\*\*/v2~[0-9a-f]{12}", a) for a in masked)  # the tag ends the id
    regions = _slice_ids(doc, "region")
    assert {"eu", "us"} < regions and any(r.startswith("eu-***~") for r in regions)
    stored = {r["assistant_id"] for f in (out / "stats" / "sessions").glob("*.parquet")
              for r in pq.read_table(f).to_pylist()}
    assert stored == assistants
    results = (out / "results.json").read_text(encoding="utf-8")
    assert "assistant_id=***\"" not in results  # never the bare mask as a slice's name
    # two sessions whose ids mask to the same text are not merged: 5 sessions scored (the one whose
    # language holds the key is not: no lexicon), each its own
    rows = [r for f in (out / "sessions" / "humanity").glob("*.parquet") for r in pq.read_table(f).to_pylist()]
    sessions = {(r["session_id"], r["assistant_id"]) for r in rows}
    assert len(sessions) == 5 and len({s for s, _ in sessions}) == 5
    # the dead letter's element id and the warnings name the masked ids
    from fair_forge_beam.reports.load import iter_jsonl_lines

    dead = [json.loads(x) for x in iter_jsonl_lines(str(out), "dead_letter")]
    assert any(d["stage"] == "read" and re.fullmatch(r"s-\*\*\*~[0-9a-f]{12}/bot-\*\*\*~[0-9a-f]{12}/2", d["element_id"])
               for d in dead), [d["element_id"] for d in dead]


def test_the_same_id_masks_to_the_same_name_in_every_run_and_distinct_ids_never_merge(keys):
    from fair_forge_beam.io.secrets import ID_TAG_SEP, id_masker, mask_id

    mask = id_masker()
    assert mask("plain-id") == "plain-id" and mask(7) == 7
    a, b, c = mask(f"s-{KEY}"), mask(f"s-{KEY2}"), mask(f"s-{ESCAPED}")
    assert len({a, b, c}) == 3 and all(x.startswith("s-***" + ID_TAG_SEP) for x in (a, b, c))
    assert mask(f"s-{KEY}") == a == mask_id(f"s-{KEY}", [KEY]) == mask_id(f"s-{KEY}", [KEY, "another-secret-value"])
    assert mask(f"s-{KEY.upper()}") != a  # the loose spelling is masked too, and is another id
    assert mask("s-***") == "s-***"  # an id already reading *** is kept: the tag tells it from a masked one
    # the tag depends on the id and the key only: not on the process (a fixed value keeps runners honest)
    assert mask_id("s-sk-fixed-key-000000000000", ["sk-fixed-key-000000000000"]) == "s-***~" + _fixed_tag()


def _fixed_tag() -> str:
    import hashlib

    from fair_forge_beam.io import secrets as sec

    key = hashlib.scrypt(b"sk-fixed-key-000000000000", salt=sec._ID_SALT, dklen=32, n=2 ** 14, r=8, p=1)
    return hashlib.blake2b(b"s-sk-fixed-key-000000000000", key=key, digest_size=6).hexdigest()


@pytest.mark.slow
def test_a_rollup_of_two_such_runs_names_the_same_masked_slices(keys, tmp_path, capsys):
    from fair_forge_beam import rollup

    sessions = _sessions()
    a = _audit(_write(tmp_path / "a.jsonl", sessions[:3]), tmp_path / "a", "--no-report", "--quiet")
    b = _audit(_write(tmp_path / "b.jsonl", sessions[3:]), tmp_path / "b", "--no-report", "--quiet")
    rollup.run(["--from", str(tmp_path / "a"), "--from", str(tmp_path / "b"), "--output", str(tmp_path / "r")])
    stdout = capsys.readouterr().out
    assert KEY not in stdout and ESCAPED not in stdout
    assert _leaks(tmp_path / "r") == [] and _leaks(tmp_path / "a") == [] and _leaks(tmp_path / "b") == []
    rolled = json.loads((tmp_path / "r" / "results.json").read_text(encoding="utf-8"))
    assert _slice_ids(rolled, "assistant_id") == _slice_ids(a, "assistant_id") | _slice_ids(b, "assistant_id")
    assert "***" not in _slice_ids(rolled, "assistant_id")
    # the roll-up equals one audit of both files
    union = _audit(_write(tmp_path / "u.jsonl", sessions), tmp_path / "u", "--no-report", "--quiet")
    assert _slice_ids(union, "assistant_id") == _slice_ids(rolled, "assistant_id")


@pytest.mark.slow
def test_a_stage_command_masks_ids_where_it_reads_them(keys, tmp_path, capsys):
    """run_assistant (a stage command) with the assistant's key from the variable it names: the
    sessions it writes and its summary hold the masked ids, and the assistant is asked with them."""
    from fair_forge_beam.io.secrets import mask_id
    from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer
    from pipelines import run_assistant

    sessions = [{**s, "conversation": [{**t, "assistant": ""} for t in s["conversation"] if "assistant" in t]}
                for s in _sessions()]
    data = _write(tmp_path / "in.jsonl", sessions)
    seen = []

    def echo(req):
        seen.append(json.dumps(req.messages))
        return "Glad to help."

    with ScriptedOpenAIServer(echo) as srv:
        summary = run_assistant.run(["--input", str(data), "--assistant-kind", "openai", "--assistant-model", "bot",
                                     "--assistant-url", srv.base_url, "--assistant-api-key-env", ENV,
                                     "--output", str(tmp_path / "out"), f"--runner={FNAPI}"])
    assert KEY not in capsys.readouterr().out and _leaks(tmp_path / "out") == []
    written = [json.loads(x) for f in sorted((tmp_path / "out").rglob("*.jsonl")) for x in f.read_text().splitlines()
               if x.strip()]
    ids = {(r["session_id"], r["assistant_id"]) for r in written if "conversation" in r}
    assert len(ids) == 6 and any(TAG.search(s) for s, _ in ids) and ("clean", "bot-clean") in ids
    assert [r["language"] for r in written if r.get("session_id") == "lang" and "conversation" in r] == [mask_id(KEY)]
    assert summary and seen
    # --assistant-id replaces the ids read: masked the same way, never written
    with ScriptedOpenAIServer(echo) as srv:
        run_assistant.run(["--input", str(data), "--assistant-kind", "openai", "--assistant-model", "bot",
                           "--assistant-url", srv.base_url, "--assistant-api-key-env", ENV, "--assistant-id", f"x-{KEY}",
                           "--output", str(tmp_path / "out2"), f"--runner={FNAPI}"])
    assert _leaks(tmp_path / "out2") == []
    written = [json.loads(x) for x in (tmp_path / "out2" / "dataset.jsonl").read_text().splitlines() if x.strip()]
    assert {r["assistant_id"] for r in written} == {mask_id(f"x-{KEY}")}


def test_ids_without_a_key_are_read_as_they_are(keys):
    """The fast path: an id that holds no key is kept, the same object (a few substring tests;
    reading cost measured in the commit message)."""
    from fair_forge_beam.io.read import _ParseRecord
    from fair_forge_beam.io.secrets import id_masker

    mask, sid = id_masker(), "hh-harmless-test-0000-chosen"
    assert mask(sid) is sid
    rec = {"session_id": "s1", "assistant_id": "bot", "language": "english", "conversation": [_turn("q1")]}
    (_, (_, _, fields, _, _)), = [o.value for o in _ParseRecord()._dispatch("f", 0, json.dumps(rec))]
    assert fields[:4] == ("s1/bot/0", "s1", "bot", "english") and fields[6] == "q1"


def test_a_language_is_masked_before_it_is_normalised_and_a_source_is_masked_as_an_id(monkeypatch):
    """Issue 28 (fix28j): a language was lower-cased before it was masked, so a key with capitals
    (shorter than 16 characters: masked as written only) escaped masking in that field and was
    written whole (``language`` is a name field: writers keep it); and the ``source`` (the file
    path) in session summaries (record keys: stored in stats/sessions' reader column, named by
    session_split warnings) and dead letters was not id-masked. Both are masked as given, where
    records are read."""
    from fair_forge_beam.io import secrets as sec
    from fair_forge_beam.io.read import _ParseRecord

    short = "SkCapKey42xyz"  # 13 characters, capitals: masked as written only
    monkeypatch.setattr(sec, "_ENVS", set())
    monkeypatch.setattr(sec, "_ENVS_SNAPSHOT", frozenset())
    monkeypatch.delenv(sec.NAMES_ENV, raising=False)
    monkeypatch.setenv(ENV, short)
    sec.register_secret_env(ENV)
    source = f"/data/{short}/night.jsonl"
    session = {"session_id": "s1", "assistant_id": "bot", "language": short, "conversation": [_turn("q1")]}
    streamed = {"metadata": {"session_id": "s2", "assistant_id": "bot", "language": f" {short} "},
                "batch": _turn("q2")}
    for rec in (session, streamed):
        (_, (order, _, fields, _, _)), *_ = [o.value for o in _ParseRecord()._dispatch(source, 3, json.dumps(rec))]
        assert short.lower() not in fields[3] and short not in fields[3] and "***" in fields[3], fields[3]
        assert short not in order[1] and TAG.match(order[1][len("/data/"):]), order
    [dead] = [o.value for o in _ParseRecord()._dispatch(source, 4, "not json")]
    assert short not in dead.source and TAG.match(dead.source[len("/data/"):-len(":4")]), dead.source
