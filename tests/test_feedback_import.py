"""`dialcheck feedback import FILE` and `dialcheck feedback stats`: annotation exports (JSONL, CSV)
and DialFact gold labels joined to a run file's verdicts, into the store; bad rows one line each.

Why: an annotation round is the first feedback most deployments get; a row silently dropped or
joined to the wrong verdict would bias the certified display. The run rows here are written the
way `dialcheck eval --output` writes them (lab.evaluation.scoring.verdict_row), on real DialFact
sample records. Each test runs on both backends: a SQLite file and a real PostgreSQL database."""
from __future__ import annotations

import csv
import json

import pytest

from dialcheck.cli import main
from schemas.items import load_dialfact, response_claim_id
from schemas.settings import load_settings
from streams.feedback_store import FeedbackStore

pytestmark = pytest.mark.unit

DATA = load_settings().data.dialfact_sample


def run_row(rec, label: str, show: bool, confidence: str = "medium", surface: str = "r4g") -> dict:
    from lab.evaluation.scoring import verdict_row

    v = {"conversation_id": rec.id, "turn_id": f"{rec.id}#response", "claim_id": response_claim_id(rec),
         "claim": rec.response, "surface": {"name": "r0", "text": rec.response, "gate": None}, "label": label,
         "probabilities": {"SUPPORTS": 0.8, "REFUTES": 0.1, "NOT ENOUGH INFO": 0.1}, "evidence": [],
         "model_versions": {}, "timings_ms": {"verify": 1.0}, "status": {"state": "ok", "evidence": "strong"},
         "display": {"show": show, "tone": "supported", "confidence": confidence},
         "rationale": {"rule": "layer:guarded", "numbers": {"entail": 0.8, "contradict": 0.1, "coverage": 1.0}}}
    return {"protocol": "fv", "surface_mode": surface, **verdict_row(v, rec.id)}


@pytest.fixture
def records(data_dir):
    """12 real DialFact records (data_dir marks the tests that use them `data`, never `unit`)."""
    return load_dialfact(DATA, 12)


def write_jsonl(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_dialfact_gold_joined_to_a_run(tmp_path, records, capsys, feedback_store_url):
    # the verdict agrees with gold on the first 8 records, not on the last 4
    flip = {"SUPPORTS": "REFUTES", "REFUTES": "SUPPORTS", "NOT ENOUGH INFO": "SUPPORTS"}
    rows = [run_row(r, r.label if i < 8 else flip[r.label], show=i % 2 == 0) for i, r in enumerate(records)]
    run = write_jsonl(tmp_path / "run.jsonl", rows)
    gold = write_jsonl(tmp_path / "gold.jsonl", [{"id": r.id, "response_label": r.label, "context": r.context,
                                                  "response": r.response} for r in records]
                       + [{"id": "nobody", "response_label": "SUPPORTS"}, {"id": records[0].id, "response_label": "TRUE"}])
    store = feedback_store_url  # each backend (tests/conftest.py)
    assert main(["feedback", "import", gold, "--run", run, "--store", store]) == 0
    out, err = capsys.readouterr()
    assert "imported 12 judgements (8 right, 4 wrong, 0 unsure)" in out and "1 bad rows skipped" in out
    assert f"{gold}:14: response_label 'TRUE'" in err and "1 DialFact records have no verdict in" in err
    assert main(["feedback", "import", gold, "--run", run, "--store", store]) == 0  # again: nothing changes
    with FeedbackStore(store) as st:
        judged = st.judged()
        assert st.counts()["feedback"] == 12 and st.counts()["verdicts"] == 12
    by_claim = {j.claim_id: j for j in judged}
    for i, r in enumerate(records):
        j = by_claim[response_claim_id(r)]
        assert j.judgement == ("right" if i < 8 else "wrong") and j.source == "annotator"
        assert j.shown is (i % 2 == 0)
        assert "surface_mode" not in j.verdict and "record_id" not in j.verdict
        from schemas import Verdict
        from workers.display import BadgeFacts

        facts = BadgeFacts.of_verdict(Verdict.from_dict(j.verdict))  # the badge facts survive the run file
        assert facts is not None and facts.entail == pytest.approx(0.8) and facts.on_topic == 1.0 and j.verdict["display"]["show"] is (i % 2 == 0)


def test_dialfact_rows_need_a_run_and_a_run_with_several_surfaces_needs_one_named(tmp_path, records, capsys, feedback_store_url):
    gold = write_jsonl(tmp_path / "gold.jsonl", [{"id": r.id, "response_label": r.label} for r in records[:3]])
    store = feedback_store_url  # each backend (tests/conftest.py)
    assert main(["feedback", "import", gold, "--store", store]) == 2
    err = capsys.readouterr().err
    assert err.count("needs the verdicts it judges: --run") == 3 and "no usable row (3 bad)" in err
    assert "Traceback" not in err
    run = write_jsonl(tmp_path / "run.jsonl", [run_row(r, r.label, True, surface=s) for r in records[:3] for s in ("r0", "r4g")])
    assert main(["feedback", "import", gold, "--run", run, "--store", store]) == 2
    assert "holds the surfaces r0, r4g: choose one with --surface" in capsys.readouterr().err
    assert main(["feedback", "import", gold, "--run", run, "--surface", "r0", "--store", store]) == 0


def test_an_annotation_export_in_the_feedback_schema_jsonl_and_csv(tmp_path, capsys, feedback_store_url):
    base = {"conversation_id": "c1", "label_shown": "SUPPORTS", "source": "moderator", "ts": 1700000000.0}
    verdict = {"conversation_id": "c1", "turn_id": "t1", "claim_id": "k1", "label": "SUPPORTS",
               "display": {"show": True, "tone": "supported", "confidence": "high"}}
    rows = [{**base, "turn_id": "t1", "claim_id": "k1", "judgement": "right", "verdict": verdict},
            {**base, "turn_id": "t2", "claim_index": 0, "judgement": "wrong", "note": "wrong film"},
            {**base, "turn_id": "t3", "claim_index": 0, "judgement": "perhaps"}]
    jl = write_jsonl(tmp_path / "export.jsonl", rows)
    (tmp_path / "broken.jsonl").write_text("{nope\n")
    store = feedback_store_url  # each backend (tests/conftest.py)
    assert main(["feedback", "import", jl, "--store", store]) == 0
    out, err = capsys.readouterr()
    assert "imported 2 judgements (1 right, 1 wrong" in out and f"{jl}:3: schema feedback: judgement" in err
    csv_path = tmp_path / "export.csv"
    with open(csv_path, "w", newline="") as f:
        w = csv.DictWriter(f, ["conversation_id", "turn_id", "claim_index", "label_shown", "judgement", "source", "ts",
                               "shown", "confidence_shown"])
        w.writeheader()
        w.writerow({"conversation_id": "c2", "turn_id": "u1", "claim_index": "0", "label_shown": "REFUTES",
                    "judgement": "right", "source": "annotator", "ts": "1700000001", "shown": "true",
                    "confidence_shown": "high"})
        w.writerow({"conversation_id": "c2", "turn_id": "u2", "claim_index": "x", "label_shown": "REFUTES",
                    "judgement": "right", "source": "annotator", "ts": "1700000002"})
    assert main(["feedback", "import", str(csv_path), "--store", store]) == 0
    out, err = capsys.readouterr()
    assert "imported 1 judgements" in out and f"{csv_path}:3: schema feedback: claim_index" in err
    with FeedbackStore(store) as st:
        c = st.counts()
        (joined,) = st.judged()
    assert c["feedback"] == 3 and c["verdicts"] == 1 and joined.claim_id == "k1" and joined.confidence_shown == "high"
    assert main(["feedback", "import", str(tmp_path / "broken.jsonl"), "--store", store]) == 2
    assert "broken.jsonl:1: not JSON" in capsys.readouterr().err
    assert main(["feedback", "import", str(tmp_path / "missing.jsonl"), "--store", store]) == 2
    assert "no such file" in capsys.readouterr().err


def test_stats_prints_precision_per_badge_and_json(tmp_path, capsys, feedback_store_url):
    store = feedback_store_url  # each backend (tests/conftest.py)
    rows = [{"conversation_id": "c", "turn_id": f"t{i}", "claim_index": 0, "label_shown": "REFUTES", "shown": True,
             "judgement": "wrong" if i < 15 else "right", "source": "annotator", "ts": 1.0 + i} for i in range(20)]
    assert main(["feedback", "import", write_jsonl(tmp_path / "f.jsonl", rows), "--store", store]) == 0
    capsys.readouterr()
    assert main(["feedback", "stats", "--store", store]) == 1  # the alarm fires: exit 1 for cron and CI
    out = capsys.readouterr().out
    assert "20 judgements (5 right, 15 wrong" in out and "ALARM" in out and "drift alarm: REFUTES (exit 1)" in out
    assert main(["feedback", "stats", "--store", store, "--json"]) == 1
    got = json.loads(capsys.readouterr().out)
    rows = {r["label"]: r for r in got["precision"]}
    assert rows["REFUTES"]["n"] == 20 and rows["REFUTES"]["alarm"] and rows["SUPPORTS"]["n"] == 0
    assert main(["feedback", "stats", "--store", store, "--target", "2"]) == 2


def test_binary_gold_labels_judge_verdicts_and_a_refutes_is_not_counted_wrong(tmp_path, records, capsys,
                                                                               feedback_store_url):
    """Binary attribution labels (supported / not supported): a SUPPORTS verdict is right only on
    "supported"; a REFUTES or NOT ENOUGH INFO verdict against "not supported" is not counted wrong (a
    binary judge cannot tell refuted from silent); the gold label is kept as corrected_label."""
    verdicts = ["SUPPORTS", "SUPPORTS", "REFUTES", "REFUTES", "NOT ENOUGH INFO", "NOT ENOUGH INFO"]
    gold = ["supported", "not supported", "not supported", "SUPPORTS", "NOT SUPPORTS", "1"]
    want = ["right", "wrong", "right", "wrong", "right", "wrong"]
    run = write_jsonl(tmp_path / "run.jsonl", [run_row(r, v, True) for r, v in zip(records, verdicts)])
    labels = write_jsonl(tmp_path / "gold.jsonl", [{"id": r.id, "response_label": g} for r, g in zip(records, gold)])
    assert main(["feedback", "import", labels, "--run", run, "--store", feedback_store_url]) == 0
    assert "imported 6 judgements (3 right, 3 wrong, 0 unsure)" in capsys.readouterr().out
    with FeedbackStore(feedback_store_url) as st:
        by_claim = {j.claim_id: j for j in st.judged()}
    corrected = {cid: j.corrected_label for cid, j in by_claim.items() if j.corrected_label}
    for r, w in zip(records, want):
        assert by_claim[response_claim_id(r)].judgement == w
    assert sorted(corrected.values()) == sorted(["SUPPORTS", "NOT SUPPORTS", "NOT SUPPORTS", "SUPPORTS", "NOT SUPPORTS",
                                                 "SUPPORTS"])
