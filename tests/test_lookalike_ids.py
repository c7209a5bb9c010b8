"""fix40c item 3 (trial39 T7): ids that are one text after Unicode NFKC normalisation but differ as
written (``bot-café`` in NFC and in NFD, ``bot-K`` and the fullwidth ``bot-Ｋ``, a region in NFC and NFD)
made slices whose labels looked the same, with no warning. They stay apart (the data says two), one
data-quality warning per group names each spelling with its code points, and labels tell them apart."""
from __future__ import annotations

import json

from fair_forge_beam.quoting import shown

NFC, NFD, K, WIDE_K = "bot-caf\u00e9", "bot-cafe\u0301", "bot-K", "bot-\uff2b"


def test_labels_of_lookalike_ids_differ_and_normal_text_is_shown_as_it_is():
    assert len({shown(NFC), shown(NFD)}) == 2 and len({shown(K), shown(WIDE_K)}) == 2
    assert shown(NFC) == NFC and shown(K) == K and shown("日本語 ünïcödé") == "日本語 ünïcödé"
    assert shown(NFD) == "bot-cafe\\u0301" and shown(WIDE_K) == "bot-\\uff2b"


def test_lookalike_ids_are_kept_apart_with_one_warning_per_group(tmp_path):
    from pipelines import audit

    rows = []
    for i, aid in enumerate([NFC, NFD, K, WIDE_K, "plain"]):
        for s in range(2):
            region = "m\u00fcnchen" if s == 0 else "mu\u0308nchen"
            rows.append({"session_id": f"s{i}-{s}", "assistant_id": aid, "language": "en", "region": region,
                         "qa_id": "1", "query": "q", "assistant": "I am happy and I trust you"})
    rows.append({**rows[0], "session_id": "s\uff11"})  # fullwidth digit one vs …
    rows.append({**rows[0], "session_id": "s1"})
    data = tmp_path / "nf.jsonl"
    data.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    out = tmp_path / "o"
    audit.run(["--quiet", "--metrics", "humanity", "--input", str(data), "--slices", "overall,assistant_id,region",
                     "--output", str(out), "--no-report"])
    quality = [json.loads(line) for f in out.glob("data_quality/*.jsonl") for line in open(f, encoding="utf-8")]
    found = sorted((q["key"], q["message"]) for q in quality if q["kind"] == "lookalike_ids")
    assert [k for k, _ in found] == ["assistant_id=bot-K", "assistant_id=bot-café", "region=münchen", "session_id=s1"], found
    by = dict(found)
    assert "'bot-cafe\\u0301' (U+0301 at 8); 'bot-café' (U+00E9 at 7)" in by["assistant_id=bot-café"]
    assert "'bot-K' (ASCII only); 'bot-\\uff2b' (U+FF2B at 4)" in by["assistant_id=bot-K"]
    assert "'s1' (ASCII only); 's\\uff11' (U+FF11 at 1)" in by["session_id=s1"]
    # not merged: five assistants, two regions
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    text = json.dumps(results, ensure_ascii=False)
    for aid in (NFC, NFD, K, WIDE_K):
        assert f"assistant_id={aid}\"" in text, aid
    assert "region=m\u00fcnchen\"" in text and "region=mu\u0308nchen\"" in text
