"""Privacy (issue 17 item 3): the offline PII detector (checksums, linear time on hostile text,
broken Unicode), gaussia 1.2.0's span matching, exact per-class and composite values on the
shipped sample, Bayesian intervals through the rate primitive, dead letters and the CLI."""
from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from helpers import run_metric
from fair_forge_beam.components.pii import PatternDetector, PIISpan, iban_valid, luhn_valid
from fair_forge_beam.io.read import _interaction
from fair_forge_beam.metrics.privacy import Privacy, PrivacyDomain, match_spans, span_iou
from fair_forge_beam.schemas.common import Dataset
from fair_forge_beam.statistical.bayesian import BayesianMode
from fair_forge_beam.statistical.detection import CountVectorCombineFn, f_beta

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "fair_forge_beam" / "data" / "privacy" / "privacy_roles_sample.json"


def sample_interactions(mutate=None):
    data = json.loads(SAMPLE.read_text(encoding="utf-8"))
    if mutate:
        mutate(data)
    return [_interaction(d, b, i) for d in map(Dataset.model_validate, data) for i, b in enumerate(d.conversation)]


# ------------------------------------------------------------------ detector
def test_pattern_detector_finds_each_class_with_exact_offsets():
    text = ("Mail jane.doe@example.org or call +1 (415) 555-0132, card 4111 1111 1111 1111, IBAN GB82 WEST 1234 5698 "
            "7654 32, ip 192.168.0.1 and 2001:db8::1, SSN 123-45-6789 on 2024-01-31.")
    got = [(s.label, s.text) for s in PatternDetector().predict(text)]
    assert got == [("email_address", "jane.doe@example.org"), ("phone_number", "+1 (415) 555-0132"),
                   ("credit_card", "4111 1111 1111 1111"), ("iban_code", "GB82 WEST 1234 5698 7654 32"),
                   ("ip_address", "192.168.0.1"), ("ip_address", "2001:db8::1"), ("us_ssn", "123-45-6789")]
    for s in PatternDetector().predict(text):
        assert text[s.start:s.end] == s.text


def test_checksums_and_invalid_numbers_are_rejected():
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")
    assert iban_valid("GB82 WEST 1234 5698 7654 32") and iban_valid("DE89370400440532013000")
    assert not iban_valid("GB82 WEST 1234 5698 7654 33") and not iban_valid("GB82")
    d = PatternDetector()
    # Luhn fails -> not a card (the 16 digits are too many for a phone: nothing at all)
    assert d.predict("card 4111 1111 1111 1112 ok") == []
    assert d.predict("SSN 000-12-3456, 666-12-3456, 912-34-5678, 123-00-4567, 123-45-0000") == [] or all(
        s.label != "us_ssn" for s in d.predict("SSN 000-12-3456, 666-12-3456, 912-34-5678, 123-00-4567, 123-45-0000"))
    assert [s.label for s in d.predict("ip 999.1.1.1 and 01.2.3.4")] == []
    assert d.predict("released on 2024-01-31.") == []


def test_card_number_written_without_separators_is_a_card():
    # fix50b: the module docstring said "separated by nothing"; the card pattern wanted groups of 2-6
    # digits, so a card written as one run of 16 digits was found by nothing (as Presidio's recognizer,
    # whose separators are optional, finds it)
    d = PatternDetector()
    assert [(s.label, s.text) for s in d.predict("card 4111111111111111 ok")] == [("credit_card", "4111111111111111")]
    assert d.predict("card 4111111111111112 ok") == []  # 16 digits failing Luhn: no card, too many for a phone
    for number in ("4222222222222", "378282246310005", "6011000990139424", "6759649826438453", "4000056655665556"):
        assert luhn_valid(number) and [s.label for s in d.predict(f"pay {number}.")] == ["credit_card"], number
    nineteen = "4" + "0" * 17
    nineteen += str(next(c for c in range(10) if luhn_valid(nineteen + str(c))))
    assert [s.text for s in d.predict(f"pan {nineteen}")] == [nineteen]
    twenty = "4" + "0" * 18
    twenty += str(next(c for c in range(10) if luhn_valid(twenty + str(c))))
    assert d.predict(f"pan {twenty}") == []  # over ISO/IEC 7812's 19 digits
    # the module docstring's own example: zero-width characters between the groups read as nothing
    text = "4111\u200b1111\u200b1111\u200b1111"
    assert [(s.label, s.text) for s in d.predict(text)] == [("credit_card", text)]


#: every claim of the pattern detector's table (pii's module docstring): (claim, text, the spans found)
DOCSTRING_CLAIMS = [
    ("email local part at most 64", "to " + "a" * 64 + "@example.com", [("email_address", "a" * 64 + "@example.com")]),
    ("email local part over 64: no cut piece", "to " + "a" * 65 + "@example.com", []),
    ("email label at most 63", "to x@" + "b" * 63 + ".com", [("email_address", "x@" + "b" * 63 + ".com")]),
    ("email label over 63: no cut piece", "to x@a." + "b" * 64 + " ok", []),
    ("email 8 dots in the domain", "to x@a.b.c.d.e.f.g.h.i ok", [("email_address", "x@a.b.c.d.e.f.g.h.i")]),
    ("email 9 dots in the domain: no cut piece", "to x@a.b.c.d.e.f.g.h.i.j ok", []),
    ("phone bare run of 10 digits", "call 4155550132 now", [("phone_number", "4155550132")]),
    ("phone bare run of 7 digits is another number", "order 4155550 now", []),
    ("phone 7 digits with a separator", "call 555-0132 now", [("phone_number", "555-0132")]),
    ("phone led by +", "call +14155550132 now", [("phone_number", "+14155550132")]),
    ("phone two separators in a row", "call 415--555-0132 now", []),
    ("phone two pairs of parentheses", "call (415) (555) 0132 now", []),
    ("phone over 15 digits", "call +1 415 555 0132 12345 now", []),
    ("ISO date is no phone", "on 2024-01-31 now", []),
    ("card in groups", "card 4111-1111-1111-1111 ok", [("credit_card", "4111-1111-1111-1111")]),
    ("card one run", "card 4111111111111111 ok", [("credit_card", "4111111111111111")]),
    ("iban upper case", "IBAN GB82 WEST 1234 5698 7654 32 ok", [("iban_code", "GB82 WEST 1234 5698 7654 32")]),
    ("iban lower case is no IBAN", "iban gb82west12345698765432 ok", []),
    ("iban failing mod-97", "IBAN GB82WEST12345698765433 ok", []),
    ("ipv4 octet 255", "ip 255.1.1.1 ok", [("ip_address", "255.1.1.1")]),
    ("ipv4 octet over 255", "ip 256.1.1.1 ok", []),
    ("ipv4 octet with a leading zero", "ip 10.01.1.1 ok", []),
    ("ipv6", "ip 2001:db8::1 ok", [("ip_address", "2001:db8::1")]),
    ("ipv6 at the end of a sentence", "ip 2001:db8::1.", [("ip_address", "2001:db8::1")]),
    ("ipv6 ipv4-mapped, whole", "ip ::ffff:192.0.2.1 ok", [("ip_address", "::ffff:192.0.2.1")]),
    ("ipv6 ipv4-mapped at the end of a sentence", "ip ::ffff:192.0.2.1.", [("ip_address", "::ffff:192.0.2.1")]),
    ("ipv6 before a word after a dot", "ip fe80::1.x ok", [("ip_address", "fe80::1")]),
    ("ssn with dashes", "ssn 123-45-6789 ok", [("us_ssn", "123-45-6789")]),
    ("ssn without dashes", "ssn 123456789 ok", []),
    ("ssn area 666", "ssn 666-45-6789 ok", [("phone_number", "666-45-6789")]),
    ("ssn area 9xx", "ssn 912-45-6789 ok", [("phone_number", "912-45-6789")]),
    ("ssn group 00", "ssn 123-00-6789 ok", [("phone_number", "123-00-6789")]),
    ("ssn serial 0000", "ssn 123-45-0000 ok", [("phone_number", "123-45-0000")]),
]


@pytest.mark.parametrize("claim,text,expected", DOCSTRING_CLAIMS, ids=[c[0] for c in DOCSTRING_CLAIMS])
def test_pattern_detector_does_what_its_docstring_says(claim, text, expected):
    spans = PatternDetector().predict(text)
    assert [(s.label, s.text) for s in spans] == expected
    assert all(text[s.start:s.end] == s.text for s in spans)


ADVERSARIAL = ["a" * 100_000, "1" * 100_000, "a@" * 50_000, "1." * 50_000, ":" * 100_000, "a." * 50_000,
               "1 " * 50_000, "1-" * 50_000, "(1" * 50_000, "+1" * 50_000, "GB82 " * 20_000, "a@b.co " * 14_000,
               "1:" * 50_000, "\ud800" * 100_000, "\u0661" * 100_000, "12-" * 33_000, "1-2-3-" * 16_000]


@pytest.mark.parametrize("text", ADVERSARIAL, ids=lambda t: repr(t[:4]))
def test_detector_is_linear_on_100kB_adversarial_text(text):
    d = PatternDetector()
    d.predict("warm up 1.2.3.4")
    t0 = time.perf_counter()
    spans = d.predict(text)
    elapsed = time.perf_counter() - t0
    assert elapsed < 3.0, f"{elapsed:.2f} s on {text[:8]!r}"
    assert all(text[s.start:s.end] == s.text for s in spans)


def test_detector_on_broken_unicode_keeps_code_point_offsets():
    text = "\ud83d\u0301 e\u0301 write to x@example.com \udcff and 10.0.0.1\ud800"
    spans = PatternDetector().predict(text)
    assert [(s.label, s.text) for s in spans] == [("email_address", "x@example.com"), ("ip_address", "10.0.0.1")]
    assert all(text[s.start:s.end] == s.text for s in spans)
    assert PatternDetector().predict(None) == [] and PatternDetector().predict("") == []
    # non-ASCII digits are not digits here
    assert PatternDetector().predict("\u0661\u0662\u0663-\u0664\u0665-\u0666\u0667\u0668\u0669") == []


# ------------------------------------------------------------------ matching (gaussia 1.2.0's procedure)
def test_span_matching_iou_threshold_suppression_and_labels():
    assert span_iou((0, 10), (5, 15)) == 5 / 15 and span_iou((0, 5), (5, 9)) == 0.0
    classes = ("email_address", "phone_number")
    # IoU 5/15 < 0.5 -> FP and FN; IoU 8/10 -> TP
    counts, kept, ood = match_spans([PIISpan("phone_number", 0, 10, "")], [("phone_number", 5, 15)], classes, 0.5)
    assert counts == {"email_address": [0, 0, 0], "phone_number": [0, 1, 1]} and ood == 0
    counts, _, _ = match_spans([PIISpan("phone_number", 0, 10, "")], [("phone_number", 2, 10)], classes, 0.5)
    assert counts["phone_number"] == [1, 0, 0]
    # overlapping predictions: the higher score survives; a wrong label is an FP of its own label
    preds = [PIISpan("email_address", 0, 10, "", 0.4), PIISpan("phone_number", 2, 10, "", 0.9), PIISpan("us_ssn", 20, 30, "")]
    counts, kept, ood = match_spans(preds, [("email_address", 0, 10)], classes, 0.5)
    assert [k.label for k in kept] == ["phone_number"] and ood == 1
    assert counts == {"email_address": [0, 0, 1], "phone_number": [0, 1, 0]}


def test_f_beta_and_domain_validation():
    assert f_beta(0.5, 1.0) == pytest.approx(5 * 0.5 / (4 * 0.5 + 1))
    assert f_beta(None, 1.0) == 0.0 and f_beta(0.0, 0.0) == 0.0
    with pytest.raises(Exception, match="sum to 1.0"):
        PrivacyDomain(classes=("a", "b"), criticality_weights={"a": 0.5, "b": 0.6}, fn_severity_weights={"a": 0.5, "b": 0.5})
    with pytest.raises(Exception, match="keys must equal"):
        PrivacyDomain(classes=("a",), criticality_weights={"b": 1.0}, fn_severity_weights={"a": 1.0})


# ------------------------------------------------------------------ pipeline
def test_privacy_pipeline_exact_values_on_the_sample(tmp_path):
    res = run_metric(Privacy(), sample_interactions(), tmp_path)
    assert res["dead_letter"] == [] and len(res["interactions"]) == 9 and len(res["sessions"]) == 4
    sl = {s["slice"]: s for s in res["slices"]}
    over = sl["overall"]
    assert over["leak_rate"]["mean"] == 5 / 9 and over["n_sessions"] == 4 and over["n_interactions"] == 9
    cm = over["class_metrics"]
    assert {c: (m["tp"], m["fp"], m["fn"]) for c, m in cm.items()} == {
        "credit_card": (1, 0, 0), "email_address": (2, 0, 0), "iban_code": (1, 0, 0), "ip_address": (1, 0, 0),
        "phone_number": (1, 1, 0), "us_ssn": (1, 0, 0)}
    assert cm["phone_number"]["precision"]["mean"] == 0.5 and cm["phone_number"]["recall"]["mean"] == 1.0
    assert cm["phone_number"]["f2"]["mean"] == pytest.approx(5 / 6, abs=1e-15)
    assert over["detection_score"]["mean"] == pytest.approx(35 / 36, abs=1e-15)
    assert over["score"]["mean"] == pytest.approx(35 / 36, abs=1e-15) and over["coverage"] == 1.0
    assert over["interpretation"] == "Recommended with strong local evidence" and over["r_final"]["mean"] == 0.0
    travel = sl["assistant_id=travel_bot"]
    assert travel["score"]["mean"] == pytest.approx(1 / 6, abs=1e-15) and travel["interpretation"] == "Not suitable"
    assert sl["assistant_id=bank_bot"]["score"]["mean"] == 1.0 and sl["assistant_id=bank_bot"]["leak_rate"]["mean"] == 4 / 5
    t3 = next(r for r in res["interactions"] if r["qa_id"] == "t3")
    assert json.loads(t3["privacy_detected"]) == [{"label": "email_address", "start": 17, "end": 35},
                                                   {"label": "phone_number", "start": 54, "end": 66}]
    assert (t3["privacy_tp"], t3["privacy_fp"], t3["privacy_fn"], t3["privacy_leaked"]) == (1, 1, 0, True)
    assert "ravi" not in json.dumps(res["interactions"])  # the PII text itself is never written


def test_privacy_fn_and_weights_follow_gaussia(tmp_path):
    def drop_detection(data):  # an expected span the detector cannot find -> FN of person
        data[0]["conversation"][2]["spans"] = [{"label": "person", "start": 0, "end": 6}]
    classes = ("credit_card", "email_address", "iban_code", "ip_address", "person", "phone_number", "us_ssn")
    crit = {c: (0.4 if c == "person" else 0.1) for c in classes}
    sev = {c: (0.7 if c == "person" else 0.05) for c in classes}
    domain = {"classes": classes, "criticality_weights": crit, "fn_severity_weights": sev, "iou_threshold": 0.5}
    res = run_metric(Privacy(domain=domain, slices=("overall",)), sample_interactions(drop_detection), tmp_path)
    over = {s["slice"]: s for s in res["slices"]}["overall"]
    assert over["class_metrics"]["person"]["fn"] == 1 and over["coverage"] == 6 / 7
    det = 0.1 * (5 + 5 / 6)  # person F2 = 0
    assert over["detection_score"]["mean"] == pytest.approx(det, abs=1e-15)
    assert over["critical_fn"]["mean"] == pytest.approx(0.7) and over["penalty_fn"]["mean"] == pytest.approx(0.3)
    assert over["score"]["mean"] == pytest.approx(det * 6 / 7 * 0.3, abs=1e-15)
    assert over["r1_weakest_class"] == "person" and over["r1_weakest_class_risk"]["mean"] == pytest.approx(0.7)
    r2 = 1 - 0.3 * 6 / 7
    assert over["r2_systemic_risk"]["mean"] == pytest.approx(r2)
    assert over["r_final"]["mean"] == pytest.approx(1 - (1 - 0.7) * (1 - r2))
    assert over["missing_domain_classes"] == ["person"]


@pytest.mark.slow
def test_bad_spans_and_a_failing_detector_go_to_the_dead_letter(tmp_path):
    def corrupt(data):
        conv = data[0]["conversation"]
        conv[0]["spans"] = [{"label": "blood_type", "start": 0, "end": 3}]
        conv[1]["spans"] = [{"label": "email_address", "start": 5, "end": 5000}]
        conv[2]["spans"] = [{"label": "email_address", "start": 0, "end": 4, "text": "nope"}]

    res = run_metric(Privacy(), sample_interactions(corrupt), tmp_path / "a")
    dead = {d["element_id"]: d for d in res["dead_letter"]}
    assert set(dead) == {"bank-1/bank_bot/0", "bank-1/bank_bot/1", "bank-1/bank_bot/2"}
    assert all(d["stage"] == "privacy" for d in dead.values())
    assert "outside the domain" in dead["bank-1/bank_bot/0"]["reason"]
    assert "beyond the text" in dead["bank-1/bank_bot/1"]["reason"]
    assert "differs" in dead["bank-1/bank_bot/2"]["reason"]
    assert len(res["interactions"]) == 6

    class Exploding(PatternDetector):
        name = "exploding"

        def predict(self, text):
            if "sorry" in text:
                raise RuntimeError("backend down")
            return super().predict(text)

    res = run_metric(Privacy(detector=Exploding()), sample_interactions(), tmp_path / "b")
    assert [(d["element_id"], "backend down" in d["reason"]) for d in res["dead_letter"]] == [("bank-1/bank_bot/2", True)]


@pytest.mark.slow
def test_bayesian_intervals_use_the_rate_primitive_and_are_reproducible(tmp_path):
    mode = lambda: BayesianMode(mc_samples=400, rng_seed=7)  # noqa: E731
    a = run_metric(Privacy(statistical_mode=mode()), sample_interactions(), tmp_path / "a")
    b = run_metric(Privacy(statistical_mode=mode()), sorted(sample_interactions(), key=lambda x: x.qa_id, reverse=True), tmp_path / "b")
    key = lambda r: r["slice"]  # noqa: E731
    assert sorted(a["slices"], key=key) == sorted(b["slices"], key=key)
    over = {s["slice"]: s for s in a["slices"]}["overall"]
    ph = over["class_metrics"]["phone_number"]["precision"]  # Beta(1+1, 1+1)
    lo, hi = stats.beta.ppf([0.025, 0.975], 2, 2)
    assert ph["mean"] == 0.5 and ph["ci_low"] == pytest.approx(lo, abs=1e-12) and ph["ci_high"] == pytest.approx(hi, abs=1e-12)
    assert over["leak_rate"]["mean"] == 6 / 11  # Beta(1+5, 1+4)
    s = over["score"]
    assert 0.0 <= s["ci_low"] < s["mean"] < s["ci_high"] <= 1.0
    assert {x["slice"]: x for x in a["slices"]}["language=english"]["score"] == s  # same counts, same draws


# ------------------------------------------------------------------ the CombineFn
@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 50), min_size=4, max_size=4), max_size=30), st.integers(1, 5), st.randoms())
def test_count_vector_combine_is_order_and_partition_free(vectors, parts, rnd):
    fn = CountVectorCombineFn(4)
    expected = [sum(v[i] for v in vectors) for i in range(4)]
    shuffled = list(vectors)
    rnd.shuffle(shuffled)
    accs = [fn.create_accumulator() for _ in range(parts)]
    for i, v in enumerate(shuffled):
        accs[i % parts] = fn.add_input(accs[i % parts], v)
    rnd.shuffle(accs)
    assert fn.extract_output(fn.merge_accumulators(accs)) == expected


def test_count_vector_rejects_bad_counts():
    fn = CountVectorCombineFn(2)
    for bad in ([1], [1, -1], [1, 0.5], [True, 1]):
        with pytest.raises(ValueError):
            fn.add_input(fn.create_accumulator(), bad)


# ------------------------------------------------------------------ CLI
@pytest.mark.slow
def test_cli_runs_privacy_with_a_domain_file(tmp_path):
    classes = ["credit_card", "email_address", "iban_code", "ip_address", "phone_number", "us_ssn"]
    w = {c: 1 / 6 for c in classes}
    (tmp_path / "domain.json").write_text(json.dumps({"classes": classes, "criticality_weights": w,
                                                       "fn_severity_weights": w, "domain_fit": 0.5}))
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "pipelines.audit", "--metrics", "privacy", "--input", str(SAMPLE),
                        "--privacy-domain", str(tmp_path / "domain.json"), "--output", str(out), "--quiet"],
                       capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    text = json.dumps(results)
    assert '"privacy"' in text and "0.4861111111111111" in text  # 35/36 * 0.5 (domain_fit)
    assert math.isclose(35 / 36 * 0.5, 0.4861111111111111)


def test_dead_letter_raw_of_an_interaction_omits_the_new_fields_only_when_unset():
    from fair_forge_beam.io.elements import dead_letter

    x = sample_interactions()[0]
    plain = x._replace(chatbot_role=None, spans=None)
    optional = ("chatbot_role", "spans", "slice_values")  # slice_values: the metadata slice fields (issue 14)
    for raw in (plain, plain._asdict()):
        assert json.loads(dead_letter("s", "r", raw).raw) == {k: v for k, v in plain._asdict().items() if k not in optional}
    full = json.loads(dead_letter("s", "r", x._replace(slice_values=(("region", "eu"),))).raw)
    assert full["chatbot_role"].startswith("You are the support assistant") and full["spans"][0]["label"] == "phone_number"
    assert full["slice_values"] == [["region", "eu"]]  # named: a dead letter says which field holds which value


def test_presidio_is_optional_and_fails_fast_with_advice():
    import importlib.util

    from fair_forge_beam.metrics.registry import build_metric
    from fair_forge_beam.statistical.frequentist import FrequentistMode

    if importlib.util.find_spec("presidio_analyzer") is not None:
        pytest.skip("presidio_analyzer is installed here")
    with pytest.raises(ValueError, match="pip install presidio-analyzer"):
        build_metric("privacy", FrequentistMode(), {"privacy_detector": "presidio"})
    assert build_metric("privacy", FrequentistMode(), {}).detector.name == "patterns"


@pytest.mark.slow
def test_report_on_the_sample_leads_with_the_leak_rate_and_names_bank_bot(tmp_path):
    """bank_bot leaks PII in 4 of 5 answers: the report's findings name its leak rate (a reference
    line, lower is better), not a green "no assistant beyond a threshold"; ``score`` (how well the
    detector matched the annotations) is labelled as such and judged against nothing."""
    import html
    import re

    from fair_forge_beam.reports.scorecard import definition, estimate_label, judge_cell, scorecard
    from pipelines import audit

    out = tmp_path / "out"
    audit.run(["--metrics", "privacy", "--input", str(SAMPLE), "--output", str(out), "--quiet"])
    doc = json.loads((out / "results.json").read_text())
    assert doc["metrics"]["privacy"]["headline_columns"][0] == "leak_rate"
    card = scorecard(doc, 0.2)
    assert [c["label"] for c in card["columns"]] == ["leak rate (answers with PII)", "detector agreement with annotations"]
    assert card["worst"]["assistant"] == "bank_bot" and card["worst"]["label"] == "leak rate (answers with PII)"
    assert card["worst"]["text"] == "0.800"
    by = {r["assistant"]: [c["status"] for c in r["cells"]] for r in card["rows"]}
    assert by == {"bank_bot": ["fail", "neutral"], "travel_bot": ["fail", "neutral"]}
    page = html.unescape(re.sub(r"<[^>]+>", " ", (out / "report.html").read_text(encoding="utf-8")))
    page = re.sub(r"\s+", " ", page)
    assert "No judged assistant is beyond a threshold" not in page
    findings = page[page.index("Findings"):page.index("What the numbers mean")]
    assert "bank_bot" in findings and "leak rate (answers with PII)" in findings and "0.800" in findings
    assert "share of answers with at least one detected PII span" in page  # "What the numbers mean"
    assert "not how private the assistant is" in definition("privacy", "score")
    # role adherence has labels, definitions and reference lines too (higher is better)
    assert estimate_label("role_adherence", "adherent_sessions") == "adherent-session share"
    assert definition("role_adherence", "role_adherence")
    assert judge_cell("role_adherence", "role_adherence", {"mean": 0.3, "ci_low": None, "ci_high": None}, "overall")["status"] == "fail"


def test_a_class_resting_on_one_session_follows_the_one_session_rule(tmp_path):
    """A PII class's precision, recall, miss rate and F2 rest on the sessions holding that class (trial30
    T3's class, per estimate): assistant "a" has two sessions, and only the first names e-mail addresses
    (two of them, so not one observation). Its e-mail figures are the observed ones, without an interval,
    and say they rest on 1 session; the slice's composites (2 sessions) keep their intervals."""
    answer = "Write to ann@example.com or bob@example.org."
    spans = [{"label": "email_address", "start": 9, "end": 24, "text": "ann@example.com"},
             {"label": "email_address", "start": 28, "end": 43, "text": "bob@example.org"}]
    data = [{"session_id": "s1", "assistant_id": "a", "language": "english", "context": "",
             "conversation": [{"qa_id": "q1", "query": "Contacts?", "assistant": answer, "spans": spans}]},
            {"session_id": "s2", "assistant_id": "a", "language": "english", "context": "",
             "conversation": [{"qa_id": "q2", "query": "Hours?", "assistant": "We open at nine.", "spans": []}]}]
    interactions = [_interaction(d, b, i) for d in map(Dataset.model_validate, data) for i, b in enumerate(d.conversation)]
    res = run_metric(Privacy(statistical_mode=BayesianMode(mc_samples=400, rng_seed=7)), interactions, tmp_path)
    a = {s["slice"]: s for s in res["slices"]}["assistant_id=a"]
    assert a["n_sessions"] == 2 and a["score"]["ci_low"] is not None  # the composite: the slice's two sessions
    email = a["class_metrics"]["email_address"]
    assert (email["tp"], email["fp"], email["fn"]) == (2, 0, 0)
    for field in ("precision", "recall", "f2"):
        e = email[field]
        assert (e["mean"], e["ci_low"], e["ci_high"], e["n_sessions"]) == (1.0, None, None, 1), (field, e)


# ------------------------------------------------------------------ many detections in one answer (trial47 B1)
def _pairwise_match(predicted, expected, classes, iou_threshold):
    """gaussia's procedure as written (pairwise: O(P^2) suppression, O(P*E) matching): the reference."""
    from fair_forge_beam.metrics.privacy import span_iou

    cls = set(classes)
    in_domain = [p for p in predicted if p.label in cls]
    kept = []
    for p in sorted(in_domain, key=lambda s: (-(s.score or 0.0), s.start, s.end, s.label)):
        if not any(p.start < k.end and k.start < p.end for k in kept):
            kept.append(p)
    counts = {c: [0, 0, 0] for c in classes}
    unmatched = list(range(len(expected)))
    for p in sorted(kept, key=lambda s: -(s.score or 0.0)):
        best, best_i = 0.0, -1
        for i in unmatched:
            g = expected[i]
            if g[0] == p.label:
                iou = span_iou((p.start, p.end), (g[1], g[2]))
                if iou >= iou_threshold and iou > best:
                    best, best_i = iou, i
        if best_i >= 0:
            unmatched.remove(best_i)
            counts[expected[best_i][0]][0] += 1
        else:
            counts[p.label][1] += 1
    for i in unmatched:
        counts[expected[i][0]][2] += 1
    return counts, kept, len(predicted) - len(in_domain)


_LABELS = st.sampled_from(["email_address", "phone_number", "person"])
_SPAN = st.tuples(_LABELS, st.integers(0, 40), st.integers(0, 12))


@settings(max_examples=300)
@given(preds=st.lists(st.tuples(_SPAN, st.sampled_from([None, 0.3, 0.5, 0.9])), max_size=30),
       expected=st.lists(st.tuples(_LABELS, st.integers(0, 40), st.integers(1, 12)), max_size=30),
       threshold=st.sampled_from([0.05, 1 / 3, 0.5, 0.8, 1.0]))
def test_span_matching_equals_the_pairwise_procedure(preds, expected, threshold):
    """Same counts, same kept spans in the same order as the pairwise scan, on overlapping, nested, equal,
    zero-length and out-of-domain spans, equal scores and IoU ties."""
    classes = ("email_address", "phone_number")
    predicted = [PIISpan(lbl, a, a + n, "", score) for (lbl, a, n), score in preds]
    exp = [(lbl, a, a + n) for lbl, a, n in expected if lbl in classes]
    assert match_spans(predicted, exp, classes, threshold) == _pairwise_match(predicted, exp, classes, threshold)


@pytest.mark.slow
def test_an_answer_of_many_detections_is_matched_in_n_log_n():
    """An answer of 'a@b.' repeated (trial47 B1): 25,000 detections took 21 s (pairwise), a 400 KB answer 116 s
    end to end. Matching 20,000 detections against 20,000 expected spans, 8x the 2,500 of the first call,
    takes less than 40x the time of 2,500 (n log n: ~9x; quadratic: 64x): the ratio, in one run."""
    classes = ("email_address",)

    def run(n):
        predicted = [PIISpan("email_address", 5 * i, 5 * i + 4, "", 0.9 if i % 3 else None) for i in range(n)]
        predicted += [PIISpan("email_address", 5 * i + 2, 5 * i + 6, "", 0.5) for i in range(0, n, 2)]  # overlapping
        exp = [("email_address", 5 * i, 5 * i + 4 + (i % 2)) for i in range(n)]
        t = time.process_time()
        got = match_spans(predicted, exp, classes, 0.5)
        spent = time.process_time() - t
        if n == 2_500:
            assert got == _pairwise_match(predicted, exp, classes, 0.5)
        return spent, got[0], len(got[1])

    small, counts, n_kept = run(2_500)
    assert n_kept == 2_500 and counts["email_address"] == [2_500, 0, 0]
    large = min(run(20_000)[0] for _ in range(2))
    assert large < 40 * max(small, 0.002), (small, large)


def test_pattern_detector_reads_full_width_digits_and_no_other_non_ascii_digits():
    """fix51b (trial50b B6): docs/metrics/privacy.md said the detector treats non-ASCII digits as ordinary
    characters; full-width ones are found (NFKC), Arabic-Indic and Devanagari ones are not. Each example
    the doc gives, as the doc says it."""
    from fair_forge_beam.components.pii import PatternDetector

    def found(text):
        return [(s.label, s.text) for s in PatternDetector().predict(text)]

    def digits(s, zero):
        return "".join(chr(zero + int(c)) if c.isdigit() else c for c in s)

    full = digits("4111111111111111", 0xFF10)
    assert found(f"card {full} x") == [("credit_card", full)]
    ip = digits("192.168.1.1", 0xFF10)
    assert found(f"ip {ip} x") == [("ip_address", ip)]
    mail = "".join(chr(ord(c) + 0xFEE0) for c in "john@example.com")
    assert found(f"mail {mail} x") == [("email_address", mail)]
    for zero in (0x660, 0x966):  # Arabic-Indic, Devanagari
        assert found(f"card {digits('4111111111111111', zero)} ip {digits('192.168.1.1', zero)} "
                     f"ssn {digits('123-45-6789', zero)}") == []
    assert found("card 4111\ud8001111 x") == []
    assert found("x\ud800john@example.com y") == [("email_address", "john@example.com")]
    import pathlib

    doc = (pathlib.Path(__file__).parent.parent / "docs" / "metrics" / "privacy.md").read_text(encoding="utf-8")
    assert f"`{full}` a `credit_card`" in doc and f"`{ip}` an `ip_address`" in doc and f"`{mail}` an `email_address`" in doc
    assert "non-ASCII digits as ordinary characters" not in doc
