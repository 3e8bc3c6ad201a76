"""`dialcheck calibrate`: the certified display thresholds (lab/tuning/calibrate.py).

The guarantee test draws calibration sets from synthetic badge scores with a known precision curve
and counts how often the certified threshold's true shown precision falls below the target."""
from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import binomtest

from lab.tuning.calibrate import (CANDIDATES, NEVER, NotCertified, certify, certify_policy, error_bound,
                                  min_testable, point_estimate, rows_of_verdicts)
from lab.tuning.display_fit import BadgeRows
from workers.display import DisplayPolicy

pytestmark = pytest.mark.unit

TARGET, CONFIDENCE = 0.85, 0.9
SHIPPED = "workers/display/params/display.json"


def p_right(s):
    """P(badge right | score s): 0.4 + 0.6 s, so shown precision above t is 0.7 + 0.3 t (0.85 from t = 0.5)."""
    return 0.4 + 0.6 * s


def true_precision(t: float) -> float:
    return 0.7 + 0.3 * t  # the mean of p_right over s ~ U(t, 1)


def test_bound_is_scipy_clopper_pearson():
    for wrong, n in ((0, 15), (3, 40), (10, 60), (59, 60)):
        two_sided = binomtest(wrong, n).proportion_ci(confidence_level=2 * CONFIDENCE - 1, method="exact")
        assert error_bound(wrong, n, CONFIDENCE) == pytest.approx(two_sided.high, abs=1e-9)
    assert error_bound(0, 0, CONFIDENCE) == 1.0
    # 15 right badges of 15 is the fewest that certify 0.85 at 0.9, 14 are not enough
    assert min_testable(TARGET, CONFIDENCE) == 15
    assert error_bound(0, 15, CONFIDENCE) <= 1 - TARGET < error_bound(0, 14, CONFIDENCE)


def test_guarantee_holds_over_200_draws_and_point_estimate_fails_more_often():
    rng = np.random.default_rng(38)
    below_cert, below_point, certified = 0, 0, 0
    for _ in range(200):
        s = rng.uniform(0, 1, 1000)  # a calibration set of 1,000 badges, scores uniform
        right = rng.uniform(0, 1, 1000) < p_right(s)
        c = certify(s, right, TARGET, CONFIDENCE)
        if c.threshold is not None:
            certified += 1
            below_cert += true_precision(c.threshold) < TARGET
        pe = point_estimate(s, right, TARGET)
        below_point += pe is not None and true_precision(pe) < TARGET
    cert_rate, point_rate = below_cert / 200, below_point / 200
    print(f"\ncertified below target: {cert_rate:.1%} of draws ({certified} certified); point estimate: {point_rate:.1%}")
    assert certified >= 150  # the test has power: most draws certify something
    assert cert_rate <= 0.10
    assert point_rate > cert_rate + 0.2


def test_strict_end_with_few_badges_does_not_stop_the_sequence():
    # 5 badges at the top (too few to test), then 200 right ones: the sequence goes on past the 5
    s = np.r_[np.full(5, 0.99), np.linspace(0.5, 0.9, 200)]
    c = certify(s, np.ones(205, bool), TARGET, CONFIDENCE)
    assert c.threshold == CANDIDATES[-1] or c.threshold <= 0.5


def test_first_failure_stops_the_sequence():
    # strict badges all right, then a band of wrong ones, then right ones again below: the
    # certified threshold stays above the wrong band even though a looser one would pass in total
    s = np.r_[np.full(100, 0.95), np.full(40, 0.8), np.full(400, 0.6)]
    right = np.r_[np.ones(100, bool), np.zeros(40, bool), np.ones(400, bool)]
    c = certify(s, right, TARGET, CONFIDENCE)
    assert c.threshold == pytest.approx(0.81)
    assert c.n == 100 and c.wrong == 0


def _rows(label, score, right, strong=None):
    n = len(label)
    strong = np.ones(n, bool) if strong is None else np.asarray(strong, bool)
    return BadgeRows(np.asarray(label, int), np.asarray(score, float), strong, np.zeros(n, bool), np.asarray(right, bool))


def test_certify_policy_per_label_and_high():
    policy = DisplayPolicy.load(SHIPPED)
    rng = np.random.default_rng(1)
    s = rng.uniform(0, 1, 1100)
    label = np.r_[np.zeros(1000, int), np.ones(60, int), -np.ones(40, int)]
    right = rng.uniform(0, 1, 1100) < p_right(s)
    new, cert = certify_policy(policy, _rows(label, s, right), TARGET, CONFIDENCE, data={"source": "test"})
    assert new.scorer is policy.scorer and new.complete == policy.complete and new.evidence == policy.evidence
    sup = cert["labels"]["SUPPORTS"]
    assert sup["threshold"] is not None and sup["bound"] <= 1 - TARGET
    assert true_precision(sup["threshold"]) >= TARGET - 0.03
    assert new.high["SUPPORTS"] >= new.show["SUPPORTS"]
    assert cert["claims"] == 1100 and cert["data"] == {"source": "test"}
    assert set(cert) >= {"n", "coverage", "target", "confidence", "labels"}


def test_a_label_not_certified_is_never_shown_and_nothing_certified_raises():
    policy = DisplayPolicy.load(SHIPPED)
    label = np.r_[np.zeros(300, int), np.ones(10, int)]  # 10 REFUTES badges: too few for any bound
    s = np.r_[np.linspace(0.6, 1.0, 300), np.full(10, 0.95)]
    new, cert = certify_policy(policy, _rows(label, s, np.ones(310, bool)), TARGET, CONFIDENCE)
    assert new.show["REFUTES"] == NEVER and cert["not_certified"] == ["REFUTES"]
    with pytest.raises(NotCertified, match="SUPPORTS: too few badges"):
        certify_policy(policy, _rows(np.zeros(12, int), np.full(12, 0.9), np.ones(12, bool)), TARGET, CONFIDENCE)


def test_nothing_certified_because_of_the_bound_says_n_wrong_bound_and_the_target_it_could_certify():
    """Many badges, one in ten of the top 60 wrong, half of the rest: the count is not what stops it, the
    bound is; the line names the first test's n, wrong and bound, and a lower target that would certify."""
    policy = DisplayPolicy.load(SHIPPED)
    n = 400
    rank = np.arange(n)[::-1]  # 0 = the highest score (linspace ascends)
    right = np.where(rank < 60, rank % 10 != 5, rank % 2 == 1)
    with pytest.raises(NotCertified) as err:
        certify_policy(policy, _rows(np.zeros(n, int), np.linspace(0.5, 1.0, n), right), TARGET, CONFIDENCE)
    line = str(err.value)
    assert "\n" not in line and "too few" not in line.split("REFUTES")[0]
    assert "SUPPORTS: the error bound stopped it at the first threshold tested" in line
    assert "REFUTES: too few badges" in line
    import re
    m = re.search(r"highest target it could certify is (0\.\d\d)", line)
    assert m and 0.5 <= float(m.group(1)) < 0.85  # one wrong among the first few: certifiable well below


def _run_row(i: int, label: str, p: float, entail: float) -> dict:
    return {"protocol": "fv", "surface_mode": "r0", "record_id": f"r{i}", "claim_id": f"c{i}", "label": label,
            "probabilities": {"SUPPORTS": p if label == "SUPPORTS" else 0.1, "REFUTES": p if label == "REFUTES" else 0.1,
                              "NOT ENOUGH INFO": 0.1},
            "status": {"state": "ok", "reason": None, "evidence": "strong"}, "uncovered": [], "mismatches": [],
            "surface": {"text": f"claim {i}"}, "rationale": "the window",
            "rationale_numbers": {"entail": entail, "contradict": 0.05, "coverage": 0.9, "reply": True, "windows_read": 2},
            "model_versions": {"nli": "dialcheck-nli-minilm-l6-fp32-step438"}}


def test_run_rows_score_like_the_runtime_policy():
    """A run file's row scored by calibrate equals the display the runtime would give that verdict."""
    from schemas import Status
    from lab.tuning.calibrate import _facts

    policy = DisplayPolicy.load(SHIPPED)
    v = _run_row(0, "SUPPORTS", 0.9, 0.9)
    rows = rows_of_verdicts(policy, [v], [True])
    facts = _facts(v)
    assert facts is not None and facts.in_dialogue and facts.windows == 2
    shown = policy.display("SUPPORTS", v["probabilities"], Status("ok", None, "strong"), facts).show
    assert shown == bool(rows.p[0] >= policy.show["SUPPORTS"])
    assert rows.p[0] == pytest.approx(policy.score("SUPPORTS", v["probabilities"], "strong", facts))
    # schema 2.3: a row whose structured checks disagreed is never shown, in the runtime and in calibrate alike
    odd = {**v, "mismatches": [{"check": "slot", "type": "year", "span": "1973", "status": "clash", "evidence": "1937"}]}
    assert not policy.display("SUPPORTS", v["probabilities"], Status("ok", None, "strong"), _facts(odd)).show
    assert not rows_of_verdicts(policy, [odd], [True]).strong[0]


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_cli_writes_a_loadable_certified_display(tmp_path, capsys):
    from dialcheck.cli import main

    rng = np.random.default_rng(5)
    rows, labels = [], []
    for i in range(300):
        p = float(rng.uniform(0.5, 1.0))
        rows.append(_run_row(i, "SUPPORTS", p, p))
        labels.append({"id": f"r{i}", "response_label": "SUPPORTS" if rng.uniform() < p else "NOT ENOUGH INFO"})
    _write(tmp_path / "run.jsonl", rows)
    _write(tmp_path / "labels.jsonl", labels)
    out = tmp_path / "display.json"
    rc = main(["calibrate", "--run", str(tmp_path / "run.jsonl"), "--labels", str(tmp_path / "labels.jsonl"),
               "--display", SHIPPED, "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    d = json.loads(out.read_text())
    policy = DisplayPolicy.from_dict(d)  # the runtime's loader reads it
    assert policy.meta["nli_model"] == DisplayPolicy.load(SHIPPED).meta["nli_model"]  # still fingerprinted
    c = d["certified"]
    assert c["data"]["source"] == "run" and c["data"]["claims"] == 300
    assert c["labels"]["SUPPORTS"]["bound"] <= 0.15 and c["labels"]["REFUTES"]["threshold"] is None
    assert policy.show["SUPPORTS"] == c["labels"]["SUPPORTS"]["threshold"]
    # the runtime's loader picks it up through the display-file setting (what a worker reads at start)
    from schemas.settings import load_settings
    from workers.display import load_display

    loaded = load_display(load_settings(decision={"display_params": str(out)}).decision,
                          "dialcheck-nli-minilm-l6-fp32-step438")
    assert loaded.show == policy.show and loaded.high == policy.high


def test_cli_too_few_labels_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys):
    from dialcheck.cli import main

    _write(tmp_path / "run.jsonl", [_run_row(i, "SUPPORTS", 0.9, 0.9) for i in range(8)])
    _write(tmp_path / "labels.jsonl", [{"id": f"r{i}", "response_label": "SUPPORTS"} for i in range(8)])
    out = tmp_path / "display.json"
    rc = main(["calibrate", "--run", str(tmp_path / "run.jsonl"), "--labels", str(tmp_path / "labels.jsonl"),
               "--display", SHIPPED, "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and not out.exists()
    assert len(err) == 1 and err[0].startswith("dialcheck: nothing certified at target 0.85")
    assert "SUPPORTS: too few badges" in err[0]


@pytest.mark.parametrize("argv, says", [
    (["--run", "RUN", "--out", "x.json"], "--run needs --labels"),
    (["--run", "RUN", "--labels", "LAB", "--out", "x.json", "--target", "1.5"], "--target must be between 0 and 1"),
    (["--run", "RUN", "--labels", "nope.jsonl", "--out", "x.json"], "--labels nope.jsonl: no such file"),
    (["--run", "RUN", "--labels", "LAB"], "--out is required"),
])
def test_cli_mistakes_are_one_line(tmp_path, capsys, argv, says):
    from dialcheck.cli import main

    _write(tmp_path / "run.jsonl", [_run_row(0, "SUPPORTS", 0.9, 0.9)])
    _write(tmp_path / "labels.jsonl", [{"id": "r0", "response_label": "SUPPORTS"}])
    argv = [a.replace("RUN", str(tmp_path / "run.jsonl")).replace("LAB", str(tmp_path / "labels.jsonl")) for a in argv]
    rc = main(["calibrate", *argv, "--display", SHIPPED])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and says in err[0], err


def test_split_halves_keeps_conversations_apart():
    from lab.tuning.calibrate import split_halves

    groups = [f"g{i // 3}" for i in range(300)]
    a, b = split_halves(groups)
    assert len(a) + len(b) == 300 and 100 < len(a) < 200
    assert not {groups[i] for i in a} & {groups[i] for i in b}


def test_curve_ranks_eligible_badges_by_score():
    from lab.tuning.calibrate import curve

    policy = DisplayPolicy.load(SHIPPED)
    rows = _rows([0, 0, 1, -1], [0.9, 0.5, 0.7, 0.0], [True, False, True, False])
    c = curve(rows, policy)
    assert c["coverage"] == [25.0, 50.0, 75.0]  # 3 badges of 4 claims, the NEI one never counts
    assert c["precision"] == [100.0, 100.0, pytest.approx(66.67)]


def test_cli_from_feedback_store(tmp_path, capsys, feedback_store_url):
    """Judgements in the real feedback store (streams/feedback_store.py, SQLite and PostgreSQL) → a certified display."""
    from dialcheck.cli import main
    from schemas.feedback import Feedback
    from streams.feedback_store import FeedbackStore

    rng = np.random.default_rng(7)
    store_path = feedback_store_url
    verdicts, feedback = [], []
    for i in range(300):
        p = float(rng.uniform(0.5, 1.0))
        v = _run_row(i, "SUPPORTS", p, p)
        v.update(conversation_id=f"c{i}", turn_id=f"c{i}#t", claim_id=f"k{i}",
                 rationale={"numbers": v.pop("rationale_numbers")}, display={"show": True, "confidence": "medium"})
        v["model_versions"]["protocol"] = "fv" if i % 3 == 0 else "e2e"  # grounded verdicts judged beside the rest
        verdicts.append(v)
        judgement = "right" if rng.uniform() < p else "wrong"
        feedback.append(Feedback(f"c{i}", f"c{i}#t", "SUPPORTS", judgement, "moderator", 1000.0 + i,
                                 claim_id=f"k{i}", claim_index=0))
    feedback.append(Feedback("c0", "c0#t", "SUPPORTS", "unsure", "user", 5000.0, claim_id="k0", claim_index=0))
    with FeedbackStore(store_path) as store:
        store.add_verdicts(verdicts, [0] * len(verdicts))
        store.add_feedback(feedback)
    out = tmp_path / "display.json"
    rc = main(["calibrate", "--from-feedback", "--store", str(store_path), "--display", SHIPPED, "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    c = json.loads(out.read_text())["certified"]
    assert c["data"]["source"] == "feedback" and c["data"]["claims"] == 300  # the 'unsure' one left out
    assert c["data"]["protocols"] == {"e2e": 200, "fv": 100}  # the certificate says which traffic it rests on
    assert c["labels"]["SUPPORTS"]["threshold"] is not None
