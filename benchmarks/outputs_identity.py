"""Are the main job's outputs byte-identical between two checkouts of this repository?

Issue 29's acceptance (and issue 26's for the default audit): the outputs of the default audit and
of one run of every registered metric are byte-identical before and after a change, on the
in-memory runner and on Flink. This script runs the same audits from two trees and compares every
output file::

    git worktree add --detach /work/id-base 596fa69
    python benchmarks/outputs_identity.py --tree /work/id-base --tree . [--runner inmemory|flink|prism]
        [--runs readme,privacy-frequentist,...] [--work DIR] [--keep] [--hash-seed N|random] [--compare-only]

Each audit is ``sys.executable -m pipelines.audit ...`` run with ``PYTHONPATH=<tree>`` and
``cwd=<tree>``, so each tree runs its own code (the interpreter, its venv and the packages are the
same). The runs (``--list`` prints them):

* ``readme`` — the README's main job: the command of the README's first set-up block, read from
  each tree's own README (``fair-forge-beam ARGS`` → ``-m pipelines.audit ARGS``), on the shipped
  data and the embedded defaults. Only ``--output`` is replaced (by a folder outside the tree);
* ``<metric>-<mode>`` — one run of every metric of ``fair_forge_beam.metrics.registry.METRICS``
  (tree A's list; a metric without a run here is an error, so a new metric cannot be missed) in
  ``--mode frequentist`` and ``bayesian``, on a small subset of the shipped examples
  (``fair_forge_beam/data/examples/fair_forge_examples.json``, ``data/privacy/privacy_roles_sample.json``
  of tree A: both trees read the same input file). The judge, guardian and generator metrics
  talk to one :class:`~fair_forge_beam.testing.openai_server.ScriptedOpenAIServer` on 127.0.0.1
  started here, whose answer is a pure function of the request (:func:`deterministic_answer`), so
  both trees get the same reply to the same request. Fixed ``--seed`` (Bayesian runs); every run gets a fresh
  judge cache.

Both trees write to the same output path, one after the other (the first tree's outputs are moved
away before the second runs), so the output folder's absolute path is the same in both and needs no
normalising. The outputs compared are every file of the output folder, the run's stdout
(``<stdout>``), its exit code (``<exit code>``) and, for runs with the server, the sorted request
bodies the run sent (``<requests>``: the prompts).

What is normalised before comparing (``NORMALISED``; nothing else):

1. the tree's absolute path (``--tree`` as given and resolved) → ``<TREE>`` in every text, JSON
   string and Parquet string value (shipped inputs are read from the tree: their paths are in
   ``run_info.json``, ``stats/manifest.json``, the data-quality and dead-letter records);
2. run ids ``YYYYMMDDTHHMMSSZ-xxxxxxxx`` → ``<RUN_ID>`` (``_SUCCESS``, ``stats/manifest.json``);
3. ``run_info.json``'s ``started_at``, ``finished_at`` and ``seconds`` values → ``<TIME>``;
4. ``report.html``'s run time in its run details (``runner <name>, N s``) → ``<TIME>``;
5. on Flink, the job server's address (``--job_endpoint=HOST:PORT``, a free port per cluster) →
   ``<JOB_ENDPOINT>`` (both clusters use the same working folder, so the workers' command path
   is the same).

6. ``stats/manifest.json``'s and ``stats/run_ids.json``'s modification times of the files read
   (``input_files``: ``[path, size, mtime, sha256, records hash]``, the content's hashes kept; two
   checkouts' shipped files have times of their own) → ``<TIME>``;
7. ``stats/manifest.json``'s size and sha256 of each file it lists (``files``) → ``<HASH>``: a
   shard whose records came in another order (8., below) has other bytes, and every listed file is
   compared itself (the file names stay);
8. the record order of shard files (``part-NNNNN-of-NNNNN.parquet|jsonl``): a folder of shards
   whose shards differ is compared as the multiset of its records over all its shards (column
   ``order``; each such shard is listed with its first difference). PCollections are unordered
   (DESIGN §2), and the order is not reproducible: two in-memory runs of one tree with one
   ``PYTHONHASHSEED`` wrote the README job's ``results.parquet``, ``sessions/``, ``slices/``,
   ``stats/`` and ``data_quality/`` records in another order; on Flink (parallelism 2) the
   records also fall into other shards. ``--strict-order`` counts these shards as differing.

Every audit of both trees runs with the same ``PYTHONHASHSEED`` (``--hash-seed``, default 0; the
Flink workers inherit it). Even so, two runs of one tree are not identical: the records of
``dead_letter/`` came in another order in 4 of 5 pairs of README jobs, and so did the first dead
letters ``report.html`` shows (in file order) — a difference this script reports.
A JSON-lines or Parquet file (not a shard) whose records are the same in another order is reported
as such (``the same N records in another order``): a difference.

A file is compared by its raw bytes first (reported separately: column ``raw``), then normalised:
Parquet by its schema (with metadata) and its records (pyarrow), JSON / JSON lines by the parsed
values, anything else as text line by line. The table gives, per run, the files, how many are
identical byte for byte, how many after normalising, and each differing file with its first
difference. Exit code 0 when every run's outputs are identical after normalising, 1 otherwise, 2
on a usage error.

Runners: ``inmemory`` (FnApiRunner), ``prism`` (the cached Prism binary,
:mod:`fair_forge_beam.testing.beam_runners`) and ``flink``: one local Flink cluster per tree
(:mod:`fair_forge_beam.testing.flink_cluster`, started with that tree's ``PYTHONPATH``, so its SDK
workers import that tree), stopped at the end. Flink is slow: pass a reduced ``--runs``.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # the server and the runner helpers of this script's own tree
    sys.path.insert(0, str(ROOT))

FNAPI = "apache_beam.runners.portability.fn_api_runner.FnApiRunner"
RUNNERS = ("inmemory", "flink", "prism")
MODES = ("frequentist", "bayesian")
SEED = "7"
MC_SAMPLES = "1000"
EXAMPLES = "fair_forge_beam/data/examples/fair_forge_examples.json"
PRIVACY_SAMPLE = "fair_forge_beam/data/privacy/privacy_roles_sample.json"
RUN_ID = re.compile(r"\b\d{8}T\d{6}Z-[0-9a-f]{8}\b")
TIME_FIELDS = ("started_at", "finished_at", "seconds")
SHARD = re.compile(r"^(.*/)?part-\d{5}-of-\d{5}\.(parquet|jsonl)$")
JOB_ENDPOINT = re.compile(r"(--job_endpoint=)[\w.\-]+:\d+")
REPORT_SECONDS = re.compile(r"(<dt>runner</dt><dd><code>[^<]*</code>, )\d+(?:\.\d+)? s(</dd>)")
NORMALISED = (
    "the tree's absolute path -> <TREE> (texts, JSON strings, Parquet string values)",
    "run ids YYYYMMDDTHHMMSSZ-xxxxxxxx -> <RUN_ID>",
    "run_info.json: started_at, finished_at, seconds -> <TIME>",
    "report.html: the run's seconds in 'runner <name>, N s' of the run details -> <TIME>",
    "Flink: the job server's address in --job_endpoint=HOST:PORT -> <JOB_ENDPOINT> (one cluster per tree)",
    "stats/manifest.json, stats/run_ids.json: the modification time in input_files' [path, size, mtime, ...] -> <TIME>",
    "stats/manifest.json: the size and sha256 of each file in files -> <HASH> (each file is compared itself)",
    "shard folders (part-NNNNN-of-NNNNN.parquet|jsonl): the multiset of their records, in any order and sharding "
    "(PCollections are unordered; --strict-order: not normalised)",
)


# --------------------------------------------------------------------------- the scripted endpoint
def _rng(req) -> random.Random:
    """A generator seeded by the request's content (model, messages, response format) and its
    attempt number (the k-th identical request: PromptEvaluator's k samples of one prompt)."""
    key = json.dumps([req.body.get("model"), req.body.get("messages"), req.body.get("response_format"), req.attempt],
                     sort_keys=True, default=str)
    return random.Random(hashlib.sha256(key.encode("utf-8")).digest())


def _fake(schema: dict, rng: random.Random, defs: dict, name: str = "") -> Any:
    """A value that fits JSON schema ``schema`` (pydantic's subset: $ref, anyOf, enum/const,
    objects, arrays, numbers with bounds), drawn from ``rng``."""
    if "$ref" in schema:
        return _fake(defs[schema["$ref"].rsplit("/", 1)[-1]], rng, defs, name)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return rng.choice(schema["enum"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [s for s in schema[key] if s.get("type") != "null"] or schema[key]
            return _fake(options[0], rng, defs, name)
    if "allOf" in schema:
        return _fake(schema["allOf"][0], rng, defs, name)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {k: _fake(v, rng, defs, k) for k, v in props.items()}
    if kind == "array":
        lo = int(schema.get("minItems", 1))
        hi = max(lo, min(int(schema.get("maxItems", 2)), 2))
        return [_fake(schema.get("items", {"type": "string"}), rng, defs, name) for _ in range(rng.randint(lo, hi))]
    if kind in ("number", "integer"):
        lo = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        hi = schema.get("maximum", schema.get("exclusiveMaximum", 10 if "score" in name or kind == "integer" else 1))
        if kind == "integer":
            return rng.randint(int(lo), int(hi))
        return round(lo + (hi - lo) * rng.choice((0.0, 0.25, 0.5, 0.75, 1.0)), 2)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    return f"{name or 'text'} {rng.randrange(1000)}"


GENERATED = ("Lamentamos mucho lo sucedido con tu pedido.", "Horario de atencion de lunes a viernes.",
             "Claro, te ayudo con eso.")


def deterministic_answer(req) -> Any:
    """The scripted server's answer, a pure function of the request: a JSON object fitting the
    request's ``json_schema`` (judges), a Llama-Guard label for the guardian model (``safe`` or
    ``unsafe\\nS10``), else one of three fixed texts (the prompt evaluator's generator)."""
    rng = _rng(req)
    schema = req.json_schema
    if schema:
        return _fake(schema, rng, schema.get("$defs", {}) | schema.get("definitions", {}))
    if "guard" in req.model:
        return rng.choice(("safe", "safe", "unsafe\nS10"))
    if (req.response_format or {}).get("type") == "json_object":
        return {"score": rng.choice((0.0, 0.5, 1.0)), "insight": "scripted"}
    return rng.choice(GENERATED)


# --------------------------------------------------------------------------- the runs
@dataclass
class Run:
    """One audit: ``args`` (without ``--output``, ``--runner`` and the endpoint flags), the input
    sessions it needs (``inputs``: file name -> (source file in tree A, session-id filter or None)),
    and whether it needs the scripted endpoint (``judge``: ``--judge-*``; ``guardian``;
    ``generator``)."""

    name: str
    args: list
    inputs: dict = field(default_factory=dict)
    endpoints: tuple = ()


def _ids(*prefixes: str) -> Callable[[dict], bool]:
    return lambda s: str(s.get("session_id", "")).startswith(prefixes)


QUALITY = _ids("123", "comparison_session")  # the original's Context / Conversational / Humanity examples
# per metric: (extra args, inputs, endpoints); the input file names are relative to the run's input folder
METRIC_RUNS: dict[str, tuple[list, dict, tuple]] = {
    "humanity": ([], {"in.json": (EXAMPLES, None)}, ()),
    "toxicity": ([], {"in.json": (EXAMPLES, None)}, ()),
    "bias": ([], {"in.json": (EXAMPLES, QUALITY)}, ("guardian",)),
    "context": ([], {"in.json": (EXAMPLES, QUALITY)}, ("judge",)),
    "conversational": ([], {"in.json": (EXAMPLES, QUALITY)}, ("judge",)),
    "regulatory": (["--regulatory-corpus", "callcenter", "--regulatory-embedder", "hashing", "--regulatory-threshold", "0.05",
                    "--regulatory-top-k", "2", "--chunk-size", "400", "--chunk-overlap", "40"],
                   {"in.json": (EXAMPLES, _ids("regulatory_session"))}, ("judge",)),
    "agentic": (["--agentic-k", "2"], {"in.json": (EXAMPLES, _ids("agentic_eval_session"))}, ("judge",)),
    "bestof": (["--bestof-mode", "all_pairs"], {"in.json": (EXAMPLES, _ids("comparison_session"))}, ("judge",)),
    "vision": (["--similarity-embedder", "hashing"], {"in.json": (EXAMPLES, QUALITY)}, ()),
    # the k samples of a prompt are k identical requests, answered by arrival (attempt) number: one call in
    # flight at a time gives sample i the i-th answer (concurrent calls drew answers by a race: cluster_labels differed)
    "prompt_evaluator": (["--similarity-embedder", "hashing", "--prompt-k", "3", "--seed-prompt", "Sos el asistente de un local de sushi.",
                          "--judge-max-concurrency", "1"],
                         {"in.json": (EXAMPLES, _ids("sushi_"))}, ("generator",)),
    "privacy": ([], {"in.json": (PRIVACY_SAMPLE, None)}, ()),
    "role_adherence": ([], {"in.json": (PRIVACY_SAMPLE, None)}, ("judge",)),
}


def readme_command(tree: Path) -> list:
    """The arguments of the README's main job: the first ```bash block under "## Set-up commands",
    the words after ``fair-forge-beam`` (up to a shell ``&&``/``;``/``|``).

    Raises:
        ValueError: no such block or no ``fair-forge-beam`` command in it.
    """
    text = (tree / "README.md").read_text(encoding="utf-8")
    section = text.split("## Set-up commands", 1)[-1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.+?)\n```", section, flags=re.S)
    for block in blocks:
        words = shlex.split(block.replace("\\\n", " "))
        if "fair-forge-beam" in words:
            rest = words[words.index("fair-forge-beam") + 1:]
            for stop in ("&&", ";", "|", "||"):
                if stop in rest:
                    rest = rest[:rest.index(stop)]
            return rest
    raise ValueError(f"{tree / 'README.md'}: no fair-forge-beam command in the set-up section")


def all_runs(metrics: list) -> list:
    """``readme`` then ``<metric>-<mode>`` for every metric of ``metrics`` and both modes.

    Raises:
        ValueError: a registered metric has no run here (add it to ``METRIC_RUNS``).
    """
    missing = [m for m in metrics if m not in METRIC_RUNS]
    if missing:
        raise ValueError(f"metrics registered but without a run in METRIC_RUNS: {', '.join(missing)}")
    runs = [Run("readme", [])]
    for m in metrics:
        extra, inputs, endpoints = METRIC_RUNS[m]
        for mode in MODES:
            # --seed and --mc-samples only where the run reads them (a frequentist run refuses them: trial34 T4)
            args = ["--metrics", m, "--mode", mode] + (["--seed", SEED, "--mc-samples", MC_SAMPLES] if mode == "bayesian" else [])
            runs.append(Run(f"{m}-{mode}", args + extra, inputs, endpoints))
    return runs


def registered_metrics(tree: Path) -> list:
    """The names in ``METRICS`` of ``tree``'s registry (read in a child process of that tree)."""
    r = subprocess.run([sys.executable, "-c", "from fair_forge_beam.metrics.registry import METRICS; print(' '.join(METRICS))"],
                       cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True, text=True, check=True)
    return r.stdout.split()


def write_inputs(run: Run, tree: Path, folder: Path) -> list:
    """Write ``run``'s input files into ``folder`` (from ``tree``'s shipped data); their ``--input`` args."""
    args = []
    for name, (source, keep) in run.inputs.items():
        sessions = json.loads((tree / source).read_text(encoding="utf-8"))
        if keep is not None:
            sessions = [s for s in sessions if keep(s)]
        path = folder / name
        path.write_text(json.dumps(sessions, ensure_ascii=False, indent=1), encoding="utf-8")
        args += ["--input", str(path)]
    return args


def endpoint_args(run: Run, base_url: str, cache: Path) -> list:
    args = ["--judge-cache", str(cache)] if run.endpoints else []
    if "judge" in run.endpoints:
        args += ["--judge-base-url", base_url, "--judge-model", "judge-model"]
    if "guardian" in run.endpoints:
        args += ["--guardian-base-url", base_url, "--guardian-model", "guard-model"]
    if "generator" in run.endpoints:
        args += ["--generator-base-url", base_url, "--generator-model", "gen-model"]
    return args


# --------------------------------------------------------------------------- runners
@contextlib.contextmanager
def runner_args_for(runner: str, tree: Path, work: Path, env_extra: dict) -> Iterator[list]:
    """The Beam options of ``runner`` for audits of ``tree`` (a Flink cluster of that tree for ``flink``)."""
    if runner == "inmemory":
        yield [f"--runner={FNAPI}"]
        return
    if runner == "prism":
        from fair_forge_beam.testing.beam_runners import runner_args

        yield runner_args("prism")
        return
    folder = work / "flink"  # the same folder (the workers' command path) for both trees' clusters, one after the other
    if folder.exists():
        shutil.rmtree(folder)
    env = {**os.environ, "PYTHONPATH": str(tree), **env_extra}  # inherited by the TaskManagers' SDK workers
    cmd = [sys.executable, "-m", "fair_forge_beam.testing.flink_cluster"]
    subprocess.run(cmd + ["start", "--dir", str(folder)], cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL)
    try:
        args = subprocess.run(cmd + ["args", "--dir", str(folder)], cwd=tree, env=env, check=True,
                              capture_output=True, text=True).stdout.split()
        yield args
    finally:
        subprocess.run(cmd + ["stop", "--dir", str(folder)], cwd=tree, env=env, stdout=subprocess.DEVNULL)


def run_audit(tree: Path, args: list, env_extra: dict, log: Path, timeout: float) -> tuple[int, str]:
    """``sys.executable -m pipelines.audit *args`` in ``tree`` (``PYTHONPATH`` and ``cwd``); (exit code, stdout).
    Its stderr goes to ``log``."""
    env = {**os.environ, "PYTHONPATH": str(tree), **env_extra}
    with open(log, "w", encoding="utf-8") as err:
        try:
            r = subprocess.run([sys.executable, "-m", "pipelines.audit", *args], cwd=tree, env=env,
                               stdout=subprocess.PIPE, stderr=err, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            return -1, (exc.stdout or b"").decode("utf-8", "replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
    return r.returncode, r.stdout


# --------------------------------------------------------------------------- comparing
class Normaliser:
    """The rules of ``NORMALISED`` for one tree: ``text(s)``, ``value(v)`` (JSON-like, recursively)."""

    def __init__(self, tree: Path):
        paths = {str(tree), str(tree.resolve())}
        self.paths = sorted(paths, key=len, reverse=True)

    def text(self, s: str, rel: str = "") -> str:
        for p in self.paths:
            s = s.replace(p, "<TREE>")
        s = RUN_ID.sub("<RUN_ID>", s)
        s = JOB_ENDPOINT.sub(r"\1<JOB_ENDPOINT>", s)
        if rel.endswith("report.html"):
            s = REPORT_SECONDS.sub(r"\1<TIME> s\2", s)
        return s

    def value(self, v: Any) -> Any:
        if isinstance(v, str):
            return self.text(v)
        if isinstance(v, dict):
            return {self.text(k) if isinstance(k, str) else k: self.value(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [self.value(x) for x in v]
        return v

    def json_doc(self, rel: str, doc: Any) -> Any:
        doc = self.value(doc)
        if rel.rsplit("/", 1)[-1] in ("manifest.json", "run_ids.json") and isinstance(doc, dict) \
                and isinstance(doc.get("input_files"), list):
            doc = {**doc, "input_files": [[*f[:2], "<TIME>", *f[3:]] if isinstance(f, list) and len(f) >= 3 else f
                                          for f in doc["input_files"]]}
        if rel.endswith("stats/manifest.json") and isinstance(doc, dict) and isinstance(doc.get("files"), dict):
            doc = {**doc, "files": {k: "<HASH>" for k in doc["files"]}}
        if rel.rsplit("/", 1)[-1] == "run_info.json" and isinstance(doc, dict):
            doc = {k: ("<TIME>" if k in TIME_FIELDS else v) for k, v in doc.items()}
        return doc


def first_difference(a: Any, b: Any, where: str = "") -> Optional[str]:
    """Where two JSON-like values first differ (``None``: equal), with both values shortened."""
    if type(a) is not type(b) and not (isinstance(a, (int, float)) and isinstance(b, (int, float))):
        return f"{where or '/'}: {_short(a)} != {_short(b)}"
    if isinstance(a, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if k not in a or k not in b:
                return f"{where}/{k}: {'missing' if k not in a else _short(a[k])} != {'missing' if k not in b else _short(b[k])}"
            d = first_difference(a[k], b[k], f"{where}/{k}")
            if d:
                return d
        if list(a) != list(b):
            i = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
            return f"{where or '/'}: key order from key {i}: {list(a)[i:i + 3]} != {list(b)[i:i + 3]}"
        return None
    if isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, f"{where}[{i}]")
            if d:
                return d
        return None if len(a) == len(b) else f"{where}: {len(a)} items != {len(b)} items"
    if a != a and b != b:  # NaN == NaN here
        return None
    return None if a == b else f"{where or '/'}: {_short(a)} != {_short(b)}"


def _short(v: Any, n: int = 70) -> str:
    s = json.dumps(v, default=str, ensure_ascii=False) if not isinstance(v, str) else repr(v)
    return s if len(s) <= n else s[:n] + "…"


def _key(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=str)


def _parquet(path: Path, norm: Normaliser) -> tuple:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    return str(table.schema.to_string(show_schema_metadata=True)), norm.value(table.to_pylist())


def compare_file(rel: str, a: Path, b: Path, norm_a: Normaliser, norm_b: Normaliser) -> tuple[bool, Optional[str]]:
    """(raw bytes equal, first difference after normalising or ``None``)."""
    ra, rb = a.read_bytes(), b.read_bytes()
    if ra == rb:
        return True, None
    try:
        if rel.endswith(".parquet"):
            (sa, xa), (sb, xb) = _parquet(a, norm_a), _parquet(b, norm_b)
            if sa != sb:
                la, lb = sa.splitlines(), sb.splitlines()
                i = next((i for i, (x, y) in enumerate(zip(la, lb)) if x != y), min(len(la), len(lb)))
                return False, f"schema line {i + 1}: {_short(la[i] if i < len(la) else None)} != {_short(lb[i] if i < len(lb) else None)}"
            diff = first_difference(xa, xb, "rows")
            if diff and sorted(map(_key, xa)) == sorted(map(_key, xb)):
                return False, f"the same {len(xa)} rows in another order ({diff})"
            return False, diff
        if rel.endswith(".json") or rel == "<requests>":
            return False, first_difference(norm_a.json_doc(rel, json.loads(ra)), norm_b.json_doc(rel, json.loads(rb)))
        if rel.endswith(".jsonl"):
            la = [norm_a.value(json.loads(x)) for x in ra.decode("utf-8").splitlines() if x.strip()]
            lb = [norm_b.value(json.loads(x)) for x in rb.decode("utf-8").splitlines() if x.strip()]
            diff = first_difference(la, lb, "lines")
            if diff and sorted(map(_key, la)) == sorted(map(_key, lb)):
                return False, f"the same {len(la)} records in another order ({diff})"
            return False, diff
    except (ValueError, OSError) as exc:  # not what its name says: compare as text
        note = f" (read as text: {type(exc).__name__})"
    else:
        note = ""
    la = norm_a.text(ra.decode("utf-8", "replace"), rel).splitlines()
    lb = norm_b.text(rb.decode("utf-8", "replace"), rel).splitlines()
    for i, (x, y) in enumerate(zip(la, lb)):
        if x != y:
            j = next((j for j, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
            return False, f"line {i + 1} col {j + 1}: {_short(x[max(0, j - 20):j + 50])} != {_short(y[max(0, j - 20):j + 50])}{note}"
    if len(la) != len(lb):
        return False, f"{len(la)} lines != {len(lb)} lines{note}"
    return False, None


@dataclass
class RunResult:
    """One run's comparison: ``files`` (both sides' union), ``raw_identical`` (byte for byte),
    ``identical`` (after normalising, the record order of shards aside), ``reordered`` (shards
    that differ, in folders holding the same records over all their shards: ``(file, first
    difference)``), ``differing`` (``(file, first difference)``)."""

    name: str
    files: int = 0
    raw_identical: int = 0
    identical: int = 0
    reordered: list = field(default_factory=list)
    differing: list = field(default_factory=list)

    def ok(self, strict_order: bool = False) -> bool:
        return not self.differing and not (strict_order and self.reordered)


def compare_outputs(name: str, a: Path, b: Path, norm_a: Normaliser, norm_b: Normaliser) -> RunResult:
    """Compare every file under side folders ``a`` and ``b`` (relative paths)."""
    res = RunResult(name)
    fa = {p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file()}
    fb = {p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file()}
    differing = []
    for rel in sorted(fa | fb):
        res.files += 1
        if rel not in fa or rel not in fb:
            differing.append((rel, f"only in tree {'B' if rel not in fa else 'A'}"))
            continue
        raw, diff = compare_file(rel, a / rel, b / rel, norm_a, norm_b)
        res.raw_identical += raw
        if raw or diff is None:
            res.identical += 1
        else:
            differing.append((rel, diff))
    # a shard folder with differing shards: are its records, over all shards, the same multiset?
    same = set()
    for folder in sorted({rel.rsplit("/", 1)[0] for rel, _ in differing if SHARD.match(rel)}):
        ra, rb = _folder_records(a / folder, norm_a), _folder_records(b / folder, norm_b)
        if ra is not None and ra == rb:
            same.add(folder)
    for rel, diff in differing:
        if SHARD.match(rel) and rel.rsplit("/", 1)[0] in same:
            res.reordered.append((rel, diff))
        else:
            res.differing.append((rel, diff))
    return res


def _folder_records(folder: Path, norm: Normaliser) -> Optional[list]:
    """The normalised records of every shard of ``folder`` (JSON lines or Parquet), as sorted JSON texts."""
    out = []
    for f in sorted(folder.iterdir()):
        if f.name.endswith(".parquet"):
            out += [_key(r) for r in _parquet(f, norm)[1]]
        elif f.name.endswith(".jsonl"):
            out += [_key(norm.value(json.loads(x))) for x in f.read_text(encoding="utf-8").splitlines() if x.strip()]
        else:
            return None
    return sorted(out)


# --------------------------------------------------------------------------- main
def side_outputs(out: Path, side: Path, code: int, stdout: str, requests: Optional[list]) -> None:
    """Move the run's output folder ``out`` to ``side/out`` and add the pseudo-files."""
    side.mkdir(parents=True)
    if out.exists():
        shutil.move(str(out), str(side / "out"))
    meta = side / "out" if (side / "out").exists() else side
    (meta.parent / "<exit code>").write_text(f"{code}\n", encoding="utf-8")
    (meta.parent / "<stdout>").write_text(stdout, encoding="utf-8")
    if requests is not None:
        (meta.parent / "<requests>").write_text(json.dumps(requests, ensure_ascii=False, indent=0), encoding="utf-8")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python benchmarks/outputs_identity.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", action="append", required=True, help="a checkout of this repository (give two)")
    ap.add_argument("--runner", choices=RUNNERS, default="inmemory")
    ap.add_argument("--runs", help="comma-separated run names (default: all; --list prints them)")
    ap.add_argument("--work", help="working folder (default: a new temporary folder, removed unless --keep)")
    ap.add_argument("--keep", action="store_true", help="keep the working folder (outputs of both trees)")
    ap.add_argument("--hash-seed", default="0",
                    help="PYTHONHASHSEED of every audit (and Flink's workers) of both trees (default 0; 'random' leaves "
                         "it unset: the dead letters' order then varies between runs of one tree)")
    ap.add_argument("--strict-order", action="store_true",
                    help="count shards whose folder holds the same records in another order or sharding as differing "
                         "(default: a folder of shards is compared as the multiset of its records)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per audit (default 1800)")
    ap.add_argument("--list", action="store_true", help="print the run names and exit")
    ap.add_argument("--compare-only", action="store_true",
                    help="run nothing: compare the outputs a previous run left in --work")
    ap.add_argument("--reuse-a", action="store_true",
                    help="tree A's outputs that a previous run left in --work are compared again, not recomputed, for "
                         "each run whose command line (output folder included), tree A, runner and --hash-seed were "
                         "the same (the tree's files are not checked: for a tree left unchanged); the others run")
    a = ap.parse_args(argv)
    if len(a.tree) != 2:
        ap.error("give exactly two --tree")
    trees = [Path(t).absolute() for t in a.tree]
    for t in trees:
        if not (t / "pipelines" / "audit.py").is_file() or not (t / "README.md").is_file():
            ap.error(f"--tree {t}: not a checkout of fair_forge_beam (no pipelines/audit.py / README.md)")
    try:
        runs = all_runs(registered_metrics(trees[0]))
    except (ValueError, subprocess.CalledProcessError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if a.list:
        print("\n".join(r.name for r in runs))
        return 0
    if a.runs:
        wanted = [w.strip() for w in a.runs.split(",") if w.strip()]
        unknown = [w for w in wanted if w not in {r.name for r in runs}]
        if unknown:
            ap.error(f"--runs: unknown {', '.join(unknown)} (--list prints the run names)")
        runs = [r for r in runs if r.name in wanted]
    if a.compare_only and not a.work:
        ap.error("--compare-only needs --work (the folder of a previous run)")
    work = Path(a.work).absolute() if a.work else Path(tempfile.mkdtemp(prefix="ffb-identity-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"trees: A = {trees[0]}, B = {trees[1]}; runner {a.runner}; work {work}")
    print("normalised: " + "; ".join(NORMALISED))

    from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer

    results: list[RunResult] = []
    started = time.monotonic()
    env_extra = {"OPENAI_API_KEY": "sk-identity-not-a-real-key"}
    if a.hash_seed != "random":
        env_extra["PYTHONHASHSEED"] = a.hash_seed
    else:
        os.environ.pop("PYTHONHASHSEED", None)
    with ScriptedOpenAIServer(deterministic_answer) as srv:
        for label, tree in ([] if a.compare_only else zip("AB", trees)):
            with runner_args_for(a.runner, tree, work, env_extra) as beam_args:
                for run in runs:
                    inputs = work / "inputs" / run.name
                    if label == "A":
                        if inputs.exists():
                            shutil.rmtree(inputs)
                        inputs.mkdir(parents=True)
                        write_inputs(run, trees[0], inputs)
                    in_args = [x for name in run.inputs for x in ("--input", str(inputs / name))]
                    scratch = work / "run"  # the same output path for both trees
                    if scratch.exists():
                        shutil.rmtree(scratch)
                    scratch.mkdir()
                    if run.name == "readme":
                        args = readme_command(tree)
                        if "--output" in args:
                            i = args.index("--output")
                            args = args[:i] + args[i + 2:]
                    else:
                        args = in_args + run.args + endpoint_args(run, srv.base_url, scratch / "judge-cache.sqlite3")
                    args = args + ["--output", str(scratch / "out")] + beam_args
                    srv.reset_counts()
                    t0 = time.monotonic()
                    side = work / label / run.name
                    # what tree A's outputs of this run depend on besides the tree's files (--reuse-a)
                    key = json.dumps({"tree": str(tree.resolve()), "runner": a.runner, "hash_seed": a.hash_seed,
                                      "args": [str(x) for x in args]}, sort_keys=True)
                    done = work / label / f"{run.name}.done"
                    if label == "A" and a.reuse_a and side.is_dir() and done.is_file() and done.read_text("utf-8") == key:
                        print(f"  A {run.name}: reused (--reuse-a: {side})", flush=True)
                        continue
                    done.unlink(missing_ok=True)
                    if side.exists():
                        shutil.rmtree(side)
                    code, stdout = run_audit(tree, args, env_extra, work / f"{label}-{run.name}.stderr", a.timeout)
                    reqs = sorted(json.dumps(r.body, sort_keys=True, ensure_ascii=False) for r in srv.requests)
                    side_outputs(scratch / "out", side, code, stdout, [json.loads(r) for r in reqs] if run.endpoints else None)
                    done.write_text(key, encoding="utf-8")
                    print(f"  {label} {run.name}: exit {code}, {time.monotonic() - t0:.1f} s, {srv.count()} requests", flush=True)
    norms = [Normaliser(t) for t in trees]
    for run in runs:
        results.append(compare_outputs(run.name, work / "A" / run.name, work / "B" / run.name, *norms))
    print(f"\n{'run':<32} {'files':>5} {'raw':>5} {'ident':>5} {'order':>5} {'diff':>5}  (first difference)")
    for r in results:
        print(f"{r.name:<32} {r.files:>5} {r.raw_identical:>5} {r.identical:>5} {len(r.reordered):>5} {len(r.differing):>5}")
        for rel, diff in r.differing:
            print(f"    {rel}: {diff}")
        for rel, diff in r.reordered:
            print(f"    order: {rel}: {diff}")
    n_ok = sum(r.ok(a.strict_order) for r in results)
    n_raw = sum(r.raw_identical == r.files for r in results)
    print(f"\n{n_ok} of {len(results)} runs identical after normalising"
          f"{' (record order of shards included: --strict-order)' if a.strict_order else ' (shards: records in any order)'}; "
          f"{n_raw} runs and {sum(r.raw_identical for r in results)} of {sum(r.files for r in results)} files identical byte for byte; "
          f"{time.monotonic() - started:.0f} s")
    if not a.keep and not a.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if n_ok == len(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
