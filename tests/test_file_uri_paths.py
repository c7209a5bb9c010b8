"""A ``file://`` URI names the local path it holds, on every path-valued option (trial49 B8).

``--input file:///abs/x.jsonl`` failed with Beam's "Unable to get filesystem from specified path …
pip install apache-beam[gcp]": Beam's file systems know no ``file`` scheme. ``user_path``, which
parses every path-valued option of every command, reads ``file:///abs`` and ``file://localhost/abs``
as ``/abs`` (percent-escapes decoded, RFC 8089) and refuses a URI of another host in one line."""
from __future__ import annotations

import argparse
import json

import pytest

from helpers import FNAPI
from fair_forge_beam.options import user_path


@pytest.mark.parametrize("uri, path", [
    ("file:///data/x.jsonl", "/data/x.jsonl"),
    ("FILE:///data/x.jsonl", "/data/x.jsonl"),
    ("file://localhost/data/logs/*.jsonl", "/data/logs/*.jsonl"),
    ("file:///data/my%20logs/x.jsonl", "/data/my logs/x.jsonl"),
    ("gs://bucket/x.jsonl", "gs://bucket/x.jsonl"),  # another scheme: Beam's to read, as ever
    ("x/file:///y", "x/file:///y"),
])
def test_a_file_uri_is_its_local_path(uri, path):
    assert user_path(uri) == path


@pytest.mark.parametrize("uri", ["file://host/data/x.jsonl", "file://localhost"])
def test_a_file_uri_of_another_host_is_refused_in_one_line(uri):
    with pytest.raises(argparse.ArgumentTypeError, match="file:///absolute/path .*give the plain path"):
        user_path(uri)


def test_an_audit_reads_its_input_given_as_a_file_uri(tmp_path, capsys):
    from pipelines import audit

    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"session_id": "s1", "assistant_id": "bot", "context": "", "conversation": [
        {"qa_id": str(i), "query": f"question {i}", "assistant": f"a kind answer {i}"} for i in range(3)]}) + "\n",
        encoding="utf-8")
    doc = audit.run(["--quiet", f"--runner={FNAPI}", "--metrics", "toxicity", "--input", data.as_uri(),
                     "--output", str(tmp_path / "out"), "--no-report"])
    assert doc["summary"]["interactions_read"] == 3
    assert doc["config"]["inputs"] == [str(data)]
    assert "Unable to get filesystem" not in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        audit.run(["--quiet", f"--runner={FNAPI}", "--metrics", "toxicity", "--input", "file://elsewhere" + str(data),
                   "--output", str(tmp_path / "out2"), "--no-report"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and "a file:// URI names a local file" in err[0], err
