"""`dialcheck adapt`: judged replies → targets, one pair per judged claim, the folds by conversation,
the ranking gate's bootstrap, the certificate's "how many more", the refusals (too few labels, a
poisoned batch) and what the command says.

Why: a label mapped to the wrong probability teaches the verifier the opposite of what the judge
said; a conversation on both sides of a fold makes the out-of-fold scores flatter than the traffic;
a claim judged a hundred times (or both ways) would steer the fit by its count; and a model written
past a failed gate would replace a better one. The real run fine-tunes the shipped model on real
BEGIN replies with a few optimiser steps (a few minutes of CPU is the real recipe; the steps here
are cut to keep the suite short). tests/test_adapt_loop.py runs a whole adaptation that the worker
takes on SIGHUP."""
from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

import numpy as np

from lab.nli.judged import (JudgedPair, dedupe, folds_by_group, from_feedback, split_by_group,
                            target_of_gold, target_of_judgement)
from streams.feedback_store import JudgedVerdict

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parent.parent


# --- the mapping --------------------------------------------------------------------------------

@pytest.mark.parametrize("label, judgement, target", [
    ("SUPPORTS", "right", "entailment"), ("SUPPORTS", "wrong", "not_entailment"),
    ("REFUTES", "right", "contradiction"), ("REFUTES", "wrong", "not_contradiction"),
    ("SUPPORTS", "unsure", None), ("NOT ENOUGH INFO", "right", None), ("NOT ENOUGH INFO", "wrong", None)])
def test_a_judged_badge_trains_only_the_probability_it_speaks_about(label, judgement, target):
    assert target_of_judgement(label, judgement) == target


@pytest.mark.parametrize("gold, target", [
    ("SUPPORTS", "entailment"), ("REFUTES", "contradiction"), ("NOT ENOUGH INFO", "not_entailment"),
    ("NOT SUPPORTS", "not_entailment"), ("supported", "entailment"), ("not supported", "not_entailment"),
    ("Fully attributable", "entailment"), ("0", "not_entailment"), ("TRUE", None), ("maybe", None)])
def test_gold_labels_three_way_and_binary(gold, target):
    assert target_of_gold(gold) == target


def _verdict(label: str, window: str = "Paris is the capital of France.", surface: str = "Paris is in France.") -> dict:
    return {"label": label, "claim": surface, "surface": {"name": "r0", "text": surface},
            "rationale": {"window": window, "numbers": {}},
            "evidence": [{"window": "unrelated", "entail": 0.1, "contradict": 0.1}]}


def _judged(label, judgement, source="moderator", conv="c1", turn="t1", ts=1.0, claim_id="k1", verdict=None,
            corrected=None):
    return JudgedVerdict(verdict=verdict if verdict is not None else _verdict(label), judgement=judgement,
                         source=source, conversation_id=conv, turn_id=turn, claim_index=0, label_shown=label,
                         received_at=ts, claim_id=claim_id, ts=ts, corrected_label=corrected)


def test_feedback_pairs_read_the_deciding_window_and_the_surface_and_keep_trusted_sources():
    judged = [_judged("SUPPORTS", "right", conv="a", claim_id="k1"),
              _judged("REFUTES", "wrong", source="annotator", conv="b", claim_id="k2"),
              _judged("SUPPORTS", "wrong", source="user", conv="c", claim_id="k3"),  # anonymous: not by default
              _judged("SUPPORTS", "unsure", conv="d", claim_id="k4"),
              _judged("NOT ENOUGH INFO", "wrong", conv="e", claim_id="k5"),
              _judged("SUPPORTS", "right", conv="f", claim_id="k6", verdict=_verdict("REFUTES"))]  # judged another label
    pairs, dropped = from_feedback(judged)
    assert [(p.target, p.group, p.source) for p in pairs] == [("entailment", "a", "moderator"),
                                                              ("not_contradiction", "b", "annotator")]
    assert pairs[0].premise == "Paris is the capital of France." and pairs[0].hypothesis == "Paris is in France."
    assert dropped == {"other_source": 1, "unsure_or_nei": 2, "other_label": 1}
    with_users, _ = from_feedback(judged, ("moderator", "annotator", "user"))
    assert ("not_entailment", "c") in [(p.target, p.group) for p in with_users]


def test_the_latest_judgement_of_a_claim_wins_and_a_corrected_label_says_more():
    judged = [_judged("SUPPORTS", "right", ts=1.0), _judged("SUPPORTS", "wrong", ts=2.0),
              # binary: not evidence of contradiction
              _judged("REFUTES", "right", conv="x", claim_id="r1", ts=3.0, corrected="NOT SUPPORTS"),
              _judged("NOT ENOUGH INFO", "wrong", conv="y", claim_id="n1", ts=4.0, corrected="SUPPORTS")]
    pairs, _ = from_feedback(judged)
    assert sorted((p.group, p.target) for p in pairs) == [("c1", "not_entailment"), ("x", "not_entailment"),
                                                          ("y", "entailment")]


def test_a_refutes_badge_against_a_binary_not_supported_is_not_counted_wrong():
    from lab.nli.adapt_run import badge_right

    binary = JudgedPair("p", "h", "not_entailment", "g", gold="NOT SUPPORTS")
    nei = JudgedPair("p", "h", "not_entailment", "g", gold="NOT ENOUGH INFO")
    judged_wrong_refutes = JudgedPair("p", "h", "not_contradiction", "g")
    assert badge_right(binary, "REFUTES") is True and badge_right(binary, "SUPPORTS") is False
    assert badge_right(nei, "REFUTES") is False
    assert badge_right(judged_wrong_refutes, "REFUTES") is False and badge_right(judged_wrong_refutes, "SUPPORTS") is None


# --- the split ----------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(5))
def test_the_split_never_cuts_a_conversation(seed):
    rng = random.Random(seed)
    pairs = [JudgedPair(f"p{i}", f"h{i}", "entailment", f"conv{rng.randrange(40)}") for i in range(300)]
    fit, held = split_by_group(pairs, 0.3, seed)
    assert not {p.group for p in fit} & {p.group for p in held}
    assert len(fit) + len(held) == 300 and 0.2 <= len(held) / 300 <= 0.45
    assert split_by_group(pairs, 0.3, seed) == (fit, held)  # seeded
    assert split_by_group(pairs, 0.3, seed + 100) != (fit, held)


@pytest.mark.parametrize("seed", range(3))
def test_folds_never_cut_a_conversation_and_are_about_equal(seed):
    rng = random.Random(seed)
    pairs = [JudgedPair(f"p{i}", f"h{i}", "entailment", f"conv{rng.randrange(60)}") for i in range(300)]
    folds = folds_by_group(pairs, 3, seed)
    fold_of = {}
    for p, f in zip(pairs, folds):
        assert fold_of.setdefault(p.group, f) == f
    sizes = [folds.count(k) for k in range(3)]
    assert sorted(set(folds)) == [0, 1, 2] and max(sizes) - min(sizes) <= max(map(lambda g: sum(p.group == g for p in pairs), fold_of))
    assert folds_by_group(pairs, 3, seed) == folds and folds_by_group(pairs, 3, seed + 1) != folds


def test_a_reply_judged_twice_counts_once_and_judged_both_ways_not_at_all():
    same = JudgedPair("ev", "reply", "entailment", "c1")
    pairs = [same, same, JudgedPair("ev ", "reply", "entailment", "c1"),  # the same pair, spaced
             JudgedPair("ev2", "r2", "entailment", "c2"), JudgedPair("ev2", "r2", "not_entailment", "c2"),
             JudgedPair("ev2", "r2", "not_contradiction", "c2"),  # another probability: kept
             JudgedPair("ev", "reply", "entailment", "c3")]  # another conversation: its own
    out, dropped = dedupe(pairs)
    assert [(p.premise, p.target, p.group) for p in out] == [("ev", "entailment", "c1"), ("ev2", "not_contradiction", "c2"),
                                                              ("ev", "entailment", "c3")]
    assert dropped == {"duplicate": 2, "conflicting": 2}


def test_a_conversation_flooded_with_contradicting_judgements_counts_once():
    """Feedback cannot steer by volume: 200 judgements of one claim from moderators and annotators,
    alternating right and wrong, are one pair at most (none when the two sources end up disagreeing);
    200 repeats of one judgement are one pair."""
    flood = [_judged("SUPPORTS", "right" if i % 2 else "wrong", source=("moderator", "annotator")[i % 2], conv="x",
                     claim_id="k", ts=float(i)) for i in range(200)]
    honest = [_judged("SUPPORTS", "right", conv=f"c{i}", claim_id=f"k{i}", ts=1.0) for i in range(5)]
    pairs, dropped = from_feedback(flood + honest)
    assert [p.group for p in pairs] == [f"c{i}" for i in range(5)] and dropped == {"conflicting": 2}
    agreeing = [_judged("SUPPORTS", "wrong", source=("moderator", "annotator")[i % 2], conv="x", claim_id="k",
                        ts=float(i)) for i in range(200)]
    pairs, dropped = from_feedback(agreeing)
    assert [(p.group, p.target) for p in pairs] == [("x", "not_entailment")] and dropped == {"same_claim": 1}
    users = [_judged("SUPPORTS", "right", source="user", conv="x", claim_id=f"k{i}") for i in range(200)]
    assert from_feedback(users)[0] == []  # users' clicks are off unless asked for


# --- the ranking gate and the certificate -------------------------------------------------------

def test_the_bootstrap_over_conversations_sees_a_real_gain_and_no_gain_in_noise():
    from sklearn.metrics import roc_auc_score

    from lab.nli.adapt_run import paired_bootstrap

    rng = np.random.default_rng(0)
    groups = [f"c{i // 4}" for i in range(400)]
    y = rng.random(400) < 0.3
    base = y * 0.6 + rng.random(400)  # AUC about 0.75
    better = y * 1.2 + rng.random(400)  # about 0.98
    noise = rng.random(400)
    out = paired_bootstrap(y, base, {"better": better, "noise": noise, "same": base}, groups, reps=300)
    assert np.quantile(out["better"]["resamples"], 0.0125) > 0.02 and out["better"]["gain"] > 0.05
    assert np.quantile(out["noise"]["resamples"], 0.0125) < 0 and out["noise"]["gain"] < 0
    assert out["same"]["gain"] == 0 and not out["same"]["resamples"].any()
    assert abs(out["better"]["gain"] - (roc_auc_score(y, better) - roc_auc_score(y, base))) < 1e-4  # sklearn's AUC


def _rows(scores, right):
    from lab.tuning.display_fit import BadgeRows

    n = len(scores)
    return BadgeRows(np.zeros(n, int), np.asarray(scores, float), np.ones(n, bool), np.zeros(n, bool), np.asarray(right, bool))


def test_how_many_more_judged_replies_a_target_needs_is_what_then_certifies():
    """15 % of 200 replies would be shown at 0.9 right: too few to certify 0.85 at 0.9; the count said
    is the one at which replies like these do certify (and one tenth fewer do not)."""
    from lab.nli.adapt_run import more_needed
    from lab.tuning.calibrate import certify
    from workers.display import DisplayPolicy

    policy = DisplayPolicy({"SUPPORTS": 0.5, "REFUTES": 0.5}, {"SUPPORTS": 0.9, "REFUTES": 0.9}, ("strong",))
    scores = [0.95] * 30 + [0.4] * 170
    right = [i % 10 != 0 for i in range(30)] + [False] * 170
    assert certify(scores, right, 0.85, 0.9).threshold is None
    more = more_needed(_rows(scores, right), policy, 0.85, 0.9)
    assert more is not None and 200 < more < 2000

    def certifies(total: int) -> bool:
        k = total / 200
        n, wrong = round(30 * k), round(3 * k)
        return certify([0.95] * n + [0.4] * (total - n), [False] * wrong + [True] * (n - wrong) + [False] * (total - n),
                       0.85, 0.9).threshold is not None
    assert certifies(200 + more) and not certifies(200 + int(0.8 * more))
    assert more_needed(_rows(scores, [i % 5 != 0 for i in range(30)] + [False] * 170), policy, 0.85, 0.9) is None  # 0.8 right


def test_the_certificate_line_says_the_target_the_best_attainable_or_what_is_missing():
    from lab.nli.adapt_run import certificate_line

    base = {"asked": 0.85, "confidence": 0.9, "floor": 0.75}
    assert certificate_line({**base, "target": 0.85, "coverage": 21.5}) == \
        "shown badges right ≥ 0.85 with probability 0.9, 21.5 % of replies shown"
    fallback = certificate_line({**base, "target": 0.8, "coverage": 12.0, "not_certified": "…", "more_needed": 240})
    assert fallback.startswith("certified at 0.8 (best attainable; 0.85 asked)") and "about 240 more judged replies" in fallback
    hidden = certificate_line({**base, "target": None, "coverage": 0.0, "not_certified": "…", "more_needed": None})
    assert hidden.startswith("no badge shown: nothing certified from 0.75 up") and "out of reach" in hidden


# --- the command --------------------------------------------------------------------------------

def _dialfact_rows(pairs_of_set, flip_groups=frozenset()) -> list[dict]:
    flip = {"SUPPORTS": "NOT SUPPORTS", "NOT SUPPORTS": "SUPPORTS"}
    return [{"id": f"r{i}", "context_id": p.group, "context": [], "response": p.hypothesis,
             "response_label": flip[p.gold] if p.group in flip_groups else p.gold,
             "evidence_list": [["", "", p.premise]]} for i, p in enumerate(pairs_of_set)]


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _cli(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, "-m", "dialcheck", *argv], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=900)


def test_too_few_labels_is_one_line_exit_2_and_nothing_written(tmp_path, capsys):
    from dialcheck.cli import main

    rows = [{"id": f"r{i}", "context_id": f"c{i // 2}", "response": f"reply {i}", "evidence_list": [["", "", f"fact {i}"]],
             "response_label": "SUPPORTS" if i % 2 else "NOT SUPPORTS"} for i in range(12)]
    out = tmp_path / "model"
    rc = main(["adapt", "--labels", str(_write(tmp_path / "labels.jsonl", rows)), "--out", str(out), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("dialcheck: too few judged replies to adapt and certify")
    assert not (out / "model.onnx").exists() and not (out / "adapt.json").exists()


@pytest.mark.parametrize("argv, says", [
    (["--out", "x"], "one of the arguments --labels --from-feedback is required"),
    (["--labels", "nope.jsonl", "--out", "x"], "--labels nope.jsonl: no such file"),
    (["--from-feedback", "--sources", "moderator,robot", "--out", "x"], "--sources moderator,robot"),
    (["--labels", "LAB", "--out", "x", "--folds", "1"], "--folds must be between 2 and 10"),
    (["--labels", "LAB", "--out", "x", "--min-target", "0.9"], "--min-target 0.9 is above --target 0.85"),
    (["--labels", "LAB", "--out", "x", "--replay-pairs", "-1"], "--replay-pairs must be 0 or more"),
    (["--labels", "LAB", "--out", "."], "is not empty: name a new directory"),
])
def test_mistakes_are_one_line(tmp_path, capsys, argv, says):
    from dialcheck.cli import main

    lab = _write(tmp_path / "l.jsonl", [{"response": "r", "response_label": "SUPPORTS", "evidence_list": [["", "", "e"]]}])
    argv = [str(lab) if a == "LAB" else str(tmp_path / a) if a == "x" else str(tmp_path) if a == "." else a
            for a in argv]
    with pytest.raises(SystemExit) if "required" in says else _nothing():
        rc = main(["adapt", *argv])
        assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0] and "Traceback" not in err[0]


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.fixture(scope="module")
def begin_wow(data_dir):
    from lab.nli.judged import from_eval_set
    from lab.tuning.datasets import load_set

    return from_eval_set(load_set("begin_wow", data_dir))


@pytest.mark.model
def test_a_poisoned_batch_does_not_pass_the_gate_one_line_exit_2_no_model(tmp_path, begin_wow):
    """A batch of judgements that say nothing about the replies (each a seeded coin flip, as a
    poisoner or a careless judge would give): the fold models fitted on them rank the other
    conversations no better than the shipped model, so the ranking gate refuses before the final
    model is trained; adapt.json says why, no model file is written."""
    rng = random.Random(55)
    pairs = [JudgedPair(p.premise, p.hypothesis, p.target, p.group, p.source,
                        "SUPPORTS" if rng.random() < 0.4 else "NOT SUPPORTS") for p in begin_wow[:120]]
    labels = _write(tmp_path / "labels.jsonl", _dialfact_rows(pairs))
    out = tmp_path / "model"
    r = _cli("adapt", "--labels", str(labels), "--out", str(out), "--folds", "2", "--max-steps", "6",
             "--target", "0.6", "--confidence", "0.5", "--quiet")
    lines = [x for x in r.stderr.splitlines() if x.startswith("dialcheck:")]
    assert r.returncode == 2 and len(lines) == 1, r.stderr[-2000:]
    assert "no model written" in lines[0] and "better with confidence" in lines[0]
    report = json.loads((out / "adapt.json").read_text())
    assert report["gate"]["passed"] is False and all(g["lower"] <= 0 for g in report["crossfit"]["gain"].values())
    assert [r["fold"] for r in report["training"]["runs"]] == [0, 1] and "guards" not in report
    assert not (out / "model.onnx").exists() and not (out / "display.json").exists() and not (out / ".adapt-work").exists()


def test_from_feedback_reads_the_store_and_too_few_judgements_is_one_line(tmp_path, capsys):
    """Judged verdicts in a real SQLite feedback store: moderators' judgements become pairs (the
    users' are left out by default), and too few of them stop before any training."""
    from dialcheck.cli import main
    from schemas.feedback import feedback_from_dict
    from streams.feedback_store import FeedbackStore

    store = str(tmp_path / "feedback.sqlite3")
    verdicts, judgements = [], []
    for i in range(10):
        v = {"conversation_id": f"c{i}", "turn_id": "t", "claim_id": f"k{i}", **_verdict("SUPPORTS")}
        verdicts.append(v)
        judgements.append(feedback_from_dict({"conversation_id": f"c{i}", "turn_id": "t", "claim_id": f"k{i}",
                                              "label_shown": "SUPPORTS", "judgement": "right" if i % 2 else "wrong",
                                              "source": "moderator" if i < 8 else "user", "ts": 1.0 + i}))
    with FeedbackStore(store) as st:
        st.add_verdicts(verdicts)
        st.add_feedback(judgements)
        pairs, dropped = from_feedback(st.judged())
    assert len(pairs) == 8 and dropped == {"other_source": 2}
    rc = main(["adapt", "--from-feedback", "--store", store, "--out", str(tmp_path / "model"), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("dialcheck: too few judged replies") and "8 pairs" in err[0]


@pytest.mark.model
def test_a_fold_model_scored_in_torch_gives_what_its_export_serves(tmp_path):
    """Cross-fitting scores each fold model in torch at every mix, without exporting it
    (TorchMixes), and exports only the mix chosen, for the display. The torch numbers must be the
    runtime's: at weight 0 the shipped model's under ONNX Runtime, at 0.5 those of the mix's own
    export; and the weight must matter (a tuned model apart from the base scores differently)."""
    import shutil

    import torch

    from lab.nli.adapt import TUNED, TorchMixes, base_checkpoint
    from workers.models.onnx_nli import OnnxNLI

    shipped = REPO / "triton_models" / "nli" / "1"
    ckpt = base_checkpoint(shipped, tmp_path / "ckpt")
    tuned = tmp_path / "tuned"
    tuned.mkdir()
    shutil.copy(shipped / "calibration.json", tuned / "calibration.json")
    gen = torch.Generator().manual_seed(0)
    from transformers import AutoModelForSequenceClassification

    state = AutoModelForSequenceClassification.from_pretrained(str(ckpt)).state_dict()
    torch.save({k: v + 0.02 * torch.randn(v.shape, generator=gen) if v.is_floating_point() else v
                for k, v in state.items()}, tuned / TUNED)
    prem = ["The Eiffel Tower is in Paris and was finished in 1889.", "Bob sold his car to Alice last week.",
            "The river floods every spring.", "Mount Everest is 8,849 metres high."] * 2
    hyp = ["The Eiffel Tower was finished in 1889.", "Alice sold her car to Bob.", "The river never floods.",
           "Cats are mammals.", "The tower is in Paris.", "Bob sold a car.", "It floods in spring.",
           "Everest is the tallest mountain in Africa."]
    mixes = TorchMixes(ckpt, tuned)
    at0, at_half = mixes.probs(0.0, prem, hyp), mixes.probs(0.5, prem, hyp)
    assert np.abs(at0 - OnnxNLI(shipped, threads=1, workers=1).predict(prem, hyp)).max() < 1e-4
    served = OnnxNLI(mixes.export(0.5, tmp_path / "mix"), threads=1, workers=1).predict(prem, hyp)
    assert np.abs(at_half - served).max() < 1e-4
    assert np.abs(at_half - at0).max() > 1e-3
    assert json.loads((tmp_path / "mix" / "calibration.json").read_text())["adapt"]["weight"] == 0.5


@pytest.fixture(scope="module")
def shipped_ckpt(tmp_path_factory):
    """The shipped model as a trainable checkpoint, built once for the fine-tunes below."""
    from lab.nli.adapt import base_checkpoint

    return base_checkpoint(REPO / "triton_models" / "nli" / "1", tmp_path_factory.mktemp("adapt") / "ckpt")


@pytest.mark.model
def test_only_the_top_layers_train_and_the_trunk_scores_what_the_export_serves(tmp_path, shipped_ckpt):
    """Adaptation trains the top `TRAIN_LAYERS` encoder layers on the frozen layers' output, computed
    once per pair (`Trunk`). The layers below must come out bit for bit the shipped ones, and a mix
    scored from the trunk's cache must be what that mix's own ONNX export serves."""
    import torch

    from lab.nli.adapt import TUNED, TorchMixes, fine_tune, trunk_for
    from workers.models.onnx_nli import OnnxNLI

    shipped = REPO / "triton_models" / "nli" / "1"
    ckpt = shipped_ckpt
    rows = ["Bob sold his car to Alice last week.", "The river floods every spring.",
            "Mount Everest is 8,849 metres high.", "The committee fined the club for the late payment."]
    claims = [("Alice sold her car to Bob.", "not_entailment"), ("It floods in spring.", "entailment"),
              ("Everest is 8,849 metres high.", "entailment"), ("The club fined the committee.", "not_entailment")]
    pairs = [JudgedPair(p, h, t, f"c{i}") for i, (p, (h, t)) in enumerate(zip(rows, claims))] * 8
    trunk = trunk_for(ckpt, shipped)
    tuned = fine_tune(shipped, pairs, seed=0, out_dir=tmp_path / "tuned", epochs=1, lr=1e-3, progress=False,
                      checkpoint=ckpt, export=False, trunk=trunk)
    from transformers import AutoModelForSequenceClassification

    base = AutoModelForSequenceClassification.from_pretrained(str(ckpt)).state_dict()
    state = torch.load(tuned / TUNED)
    moved = {k for k in state if not torch.equal(state[k], base[k])}
    assert moved and all(".layer.4." in k or ".layer.5." in k or k.startswith(("classifier", "bert.pooler"))
                         for k in moved), sorted(moved)[:5]
    assert json.loads((tuned / "calibration.json").read_text())["adapt"]["trained_layers"] == 2
    mixes = TorchMixes(ckpt, tuned, trunk=trunk)
    assert mixes.trunk is trunk
    hyp = [h for h, _ in claims] + ["The river never floods.", "Bob bought a car."]
    prem = rows + rows[1:2] + rows[:1]
    at_half = mixes.probs(0.5, prem, hyp)
    served = OnnxNLI(mixes.export(0.5, tmp_path / "mix"), threads=1, workers=1).predict(prem, hyp)
    assert np.abs(at_half - served).max() < 1e-4
    assert np.abs(at_half - mixes.probs(0.0, prem, hyp)).max() > 1e-3


# --- general NLI replay -------------------------------------------------------------------------

def _tsv(path: Path, rows: list[tuple[str, str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("sentence1\tsentence2\tgold_label\n" + "".join(f"{a}\t{b}\t{c}\n" for a, b, c in rows))


def test_replay_pairs_come_from_the_training_split_never_snli_dev_or_test(tmp_path):
    """The pairs replayed beside the judged ones are the base's training side: a training source's
    pair that is an SNLI test pair (CAD-SNLI has one in the real data), or shares an SNLI dev/test
    premise (the same image caption), is never drawn, nor a pair of the validation split; sources
    the data dir lacks are skipped, and a data dir with none gives no replay (adapt then says so)."""
    from lab.nli.adapt import replay_pairs
    from lab.nli.data import NLIPair, is_validation, snli_test

    snli = tmp_path / "nli/esnli_snli_devtest/dataset/eSNLI"
    snli.mkdir(parents=True)
    test = [("A dog runs on the beach.", "An animal is outside.", "entailment"),
            ("Two men play chess in a park.", "The men are asleep.", "contradiction")]
    dev = [("A child paints a fence.", "A kid is painting.", "entailment")]
    for split, rows in (("test", test), ("dev", dev)):
        for name, col in (("s1", 0), ("s2", 1), ("labels", 2)):
            (snli / f"{name}.{split}").write_text("".join(r[col] + "\n" for r in rows))
    fresh = [(f"Player {i} scored {i} goals in the final.", f"Player {i} scored {'no' if i % 2 else i} goals.",
              "contradiction" if i % 2 else "entailment") for i in range(60)]
    _tsv(tmp_path / "nli/cad_snli/NLI/all_combined/train.tsv",
         fresh[:30] + [test[0], (test[1][0], "Two people are outdoors.", "entailment"), (dev[0][0], "Paint.", "neutral")])
    _tsv(tmp_path / "nli/cad_snli/NLI/all_combined/dev.tsv", fresh[30:])
    _tsv(tmp_path / "nli/cad_snli/NLI/all_combined/test.tsv", [])
    assert len(snli_test(tmp_path)) == 2

    every, counts = replay_pairs(tmp_path, 1000, seed=0)
    train_side = {(a, b) for a, b, c in fresh if not is_validation(NLIPair(a, b, 0, ""))}
    assert {(p.premise, p.hypothesis) for p in every} == train_side and counts == {"cad_snli": len(every)}
    assert 40 <= len(train_side) < len(fresh)  # some of the fresh pairs are the validation split's
    assert not {p.premise for p in every} & {r[0] for r in test + dev}
    some, _ = replay_pairs(tmp_path, 8, seed=3)
    again, _ = replay_pairs(tmp_path, 8, seed=3)
    assert len(some) == 8 and some == again and set(some) <= set(every)
    assert replay_pairs(tmp_path / "elsewhere", 8) == ([], {}) and replay_pairs(tmp_path, 0) == ([], {})


@pytest.mark.model
def test_replay_holds_the_shipped_probabilities_on_general_nli_pairs(tmp_path, shipped_ckpt):
    """A fine-tune that replays general NLI pairs (KL to the shipped model's three probabilities) moves
    the model less on them than the same fine-tune without replay (16 steps: measured 0.27 → 0.004
    mean KL at weight 5), and says so in calibration.json."""
    from lab.nli.adapt import REPLAY, TorchMixes, fine_tune, trunk_for
    from lab.nli.data import NLIPair

    shipped = REPO / "triton_models" / "nli" / "1"
    ckpt = shipped_ckpt
    rows = ["Bob sold his car to Alice last week.", "The river floods every spring.",
            "Mount Everest is 8,849 metres high.", "The committee fined the club for the late payment."]
    claims = ["Alice sold her car to Bob.", "It floods in spring.", "Everest is 8,849 metres high.",
              "The club fined the committee."]
    pairs = [JudgedPair(p, h, "not_entailment", f"c{i}") for i, (p, h) in enumerate(zip(rows, claims))] * 8
    general = [NLIPair("A man is playing a guitar on stage.", "A man plays music.", 0, "t"),
               NLIPair("The cat sleeps on the sofa.", "An animal is resting.", 0, "t"),
               NLIPair("A woman is cutting vegetables.", "A woman is cooking dinner.", 1, "t"),
               NLIPair("Children are swimming in a lake.", "The children are in school.", 2, "t")] * 2
    trunk = trunk_for(ckpt, shipped)
    kw = dict(seed=0, epochs=4, batch_size=8, lr=1e-3, progress=False, checkpoint=ckpt, export=False, trunk=trunk)
    plain = fine_tune(shipped, pairs, out_dir=tmp_path / "plain", **kw)
    held = fine_tune(shipped, pairs, out_dir=tmp_path / "held", replay=general,
                     replay_note={"sources": {"t": 8}}, **kw)
    prem, hyp = [g.premise for g in general[:4]], [g.hypothesis for g in general[:4]]

    def moved(tuned):
        m = TorchMixes(ckpt, tuned, trunk=trunk)
        base, after = m.probs(0.0, prem, hyp), m.probs(1.0, prem, hyp)
        return float((base * (np.log(base) - np.log(after))).sum(1).mean())

    assert moved(held) < 0.25 * moved(plain), (moved(held), moved(plain))
    rec = json.loads((held / "calibration.json").read_text())["adapt"]
    assert rec["replay"] == {"pairs": 8, "weight": REPLAY, "per_step": 8, "loss": "distill", "sources": {"t": 8}}
    assert "KL(base ‖ adapted)" in rec["loss"]
    assert json.loads((plain / "calibration.json").read_text())["adapt"]["replay"] == {"pairs": 0}


def test_the_everyday_guard_refuses_a_model_that_supports_more_false_facts():
    """adapt guards the everyday probe pair by pair over its frozen windows (no index needed): the
    shipped model against itself passes, with the probe's own counts (every true fact has a window
    it entails); a model that reads every window as entailment supports every false fact and is
    refused, by this guard by name."""
    from types import SimpleNamespace

    from lab.nli.adapt_run import AdaptOptions, Scorer, _Batched, everyday_claims, guards

    from lab.probes.everyday import PROBE, load_windows

    facts = [json.loads(line) for line in PROBE.read_text().splitlines() if line.strip()]
    assert [(c["id"], c["label"]) for c in load_windows()] == [(f["id"], f["label"]) for f in facts]  # not stale
    claims = everyday_claims()
    assert claims is not None and len(claims) == 40 and sum(not c.supported for c in claims) == 20
    pairs = [SimpleNamespace(premise=w, hypothesis=c.claim) for c in claims for w in c.windows]
    shipped = _Batched(Scorer(REPO / "triton_models" / "nli" / "1"), pairs)  # scored once for the three guards
    same = guards(shipped, shipped, {}, [], None, AdaptOptions(), claims)
    e = same["everyday"]
    assert same["passed"] and e["shipped"] == e["adapted"]
    assert e["shipped"]["true_supports"] == 20 and e["shipped"]["false_supports"] < 20

    class ReadsEverythingAsEntailed:
        def probs(self, premises, hypotheses):
            return np.tile([0.9, 0.05, 0.05], (len(premises), 1))

    bad = guards(shipped, ReadsEverythingAsEntailed(), {}, [], None, AdaptOptions(), claims)
    assert not bad["passed"] and bad["everyday"]["adapted"]["false_supports"] == 20
    assert any(f.startswith("everyday probe: false facts supported") for f in bad["failures"])
    lenient = guards(shipped, ReadsEverythingAsEntailed(), {}, [], None, AdaptOptions(everyday_rise=20), claims)
    assert lenient["passed"]


def test_the_snli_anchor_holds_the_errors_a_badge_would_show_and_lets_caution_through():
    """The general-NLI anchor guards what a badge would show: false SUPPORTS and false REFUTES each
    within 3 points of the shipped model's. Accuracy may fall 10: a model that reads more entailed
    pairs as neutral loses badges, which the certificate counts on the deployment's own replies, not
    right ones; contradictions read as such may fall 10 too, as binary judgements cannot teach them
    back. Shown with four readings of the same 90 pairs against the shipped one."""
    from types import SimpleNamespace

    from lab.nli.adapt_run import AdaptOptions, guards

    anchor = [SimpleNamespace(premise=f"premise {i}", hypothesis=f"hypothesis {i}", label=i % 3) for i in range(90)]

    class Reads:
        def __init__(self, change=lambda i, label: label):
            self.pred = {(p.premise, p.hypothesis): change(i, p.label) for i, p in enumerate(anchor)}

        def probs(self, premises, hypotheses):
            return np.eye(3)[[self.pred[k] for k in zip(premises, hypotheses)]]

    shipped = Reads(lambda i, y: 1 if i % 10 == 0 else y)  # 9 of 90 read neutral
    cautious = Reads(lambda i, y: 1 if i % 10 == 0 or (y == 0 and i < 24) else y)  # 6 more entailments read neutral
    shortcut = Reads(lambda i, y: 0 if y == 1 and i < 20 else (1 if i % 10 == 0 else y))  # neutral read as entailment
    collapsed = Reads(lambda i, y: 1)
    at = dict(probes={}, stress=None, opts=AdaptOptions())
    ok = guards(shipped, cautious, anchor=anchor, **at)
    assert ok["passed"], ok["failures"]
    assert ok["anchor"]["adapted"]["accuracy"] < ok["anchor"]["shipped"]["accuracy"] - 0.03  # the old rule refused it
    bad = guards(shipped, shortcut, anchor=anchor, **at)
    assert not bad["passed"] and any("false SUPPORTS" in f for f in bad["failures"])
    gone = guards(shipped, collapsed, anchor=anchor, **at)
    assert not gone["passed"] and any("accuracy" in f for f in gone["failures"])
    no_refutes = Reads(lambda i, y: 1 if i % 10 == 0 or (y == 2 and i < 24) else y)  # contradictions read neutral
    lost = guards(shipped, no_refutes, anchor=anchor, **at)
    assert lost["anchor"]["adapted"]["accuracy"] >= lost["anchor"]["shipped"]["accuracy"] - 0.10
    assert not lost["passed"] and lost["failures"] == [
        "general-NLI anchor (SNLI) contradictions read as such 90.0 → 66.7 %"], lost["failures"]


def test_the_mix_written_is_the_best_ranking_one_that_holds_the_guards_and_certifies():
    """choose_mix, best-ranking first: a mix failing a guard is skipped without certifying; one whose
    display certifies less than the shipped one is passed over for the next; when no mix that holds
    the guards certifies anything, the best-ranking of them is written with no badge shown; when some
    certify less and none as much, nothing is written."""
    from lab.nli.adapt_run import choose_mix

    def run(guard, cert):
        certified = []

        def certify(w):
            certified.append(w)
            return {"none": cert[w] == "none", "less": cert[w] == "less"}
        chosen, tries = choose_mix([1.0, 0.75, 0.5, 0.25], lambda w: guard[w], certify)
        return chosen, certified

    ok = {1.0: True, 0.75: True, 0.5: True, 0.25: True}
    assert run({**ok, 1.0: False}, {0.75: "ok"}) == (0.75, [0.75])
    assert run(ok, {1.0: "less", 0.75: "none", 0.5: "ok"}) == (0.5, [1.0, 0.75, 0.5])
    assert run({**ok, 1.0: False}, {0.75: "none", 0.5: "none", 0.25: "none"}) == (0.75, [0.75, 0.5, 0.25])
    assert run(ok, {1.0: "less", 0.75: "none", 0.5: "none", 0.25: "less"}) == (None, [1.0, 0.75, 0.5, 0.25])
    assert run({w: False for w in ok}, {}) == (None, [])
