"""The adapt learning-curve harness keeps conversations whole: the judged-set loaders give every reply
of one conversation one group, and no split the harness makes (fit / scored, then the scored part's
two certification halves) puts a group on both sides. Hand-made rows in the data sets' own formats."""
from __future__ import annotations

import csv

import numpy as np
import pytest

from lab.nli.adapt_curve import certified_coverage, draw, fit_scored, halves
from lab.nli.judged import JudgedPair
from lab.nli.judged_sets import connected_groups, load_begin, load_faithdial

pytestmark = pytest.mark.unit

KNOW_A = "The Royal Blue was the Baltimore and Ohio Railroad's flagship passenger train."
KNOW_B = "Blue is one of the three primary colours of pigments in painting."
KNOW_C = "Football is a family of team sports that involve kicking a ball."


def _write(path, header, rows, delimiter=","):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, delimiter=delimiter)
        w.writerow(header)
        w.writerows(rows)


@pytest.fixture
def data_dir(tmp_path):
    audit = tmp_path / "dialogue_attribution" / "faithdial_audit"
    _write(audit / "gold" / "wow.csv", ["evidence", "history", "response", "BEGIN", "VRM"], [
        [KNOW_A, "I like trains.", "The Royal Blue was the B&O's flagship train.", "Entailment", "Edification"],
        [KNOW_C, "Do you watch sports?", "Football involves kicking a ball.", "Entailment", "Edification"],
        [KNOW_C, "hi", "Hello there!", "Generic", "Question"],  # nothing to check: left out
    ])
    _write(audit / "GPT2" / "gpt2_processed_wow.csv", ["knowledge", "history", "gpt2", "begin_label", "vrm_label"], [
        [KNOW_A, "I like trains.", "The Royal Blue ran from 1890 to 1958.", "hallucination", "edification"],
        # another snippet, but the same previous turn: the same conversation
        [KNOW_B, "I like trains.", "Blue is a primary colour.", "entailment", "edification"],
        [KNOW_C, "", "", "entailment", "edification"],  # blank reply: left out
    ])
    _write(tmp_path / "dialogue_attribution" / "begin_dev" / "begin_dev_wow.tsv",
           ["model_name", "data_source", "knowledge", "message", "response", "begin_label"], [
               ["t5", "wow", KNOW_A, "trains?", "It was the B&O's flagship.", "Fully attributable"],
               ["gpt2", "wow", KNOW_A, "trains?", "It was the fastest train.", "Not fully attributable"],
               ["gpt2", "wow", KNOW_C, "sports?", "Yes!", "Generic"],
               ["gpt2", "wow", KNOW_B, "colours?", "Blue is primary.", "Fully attributable"],
           ], delimiter="\t")
    return tmp_path


def test_faithdial_groups_answers_to_one_conversation_across_models(data_dir):
    pairs = load_faithdial(data_dir)
    assert [p.target for p in pairs] == ["entailment", "entailment", "not_entailment", "entailment"]
    by_reply = {p.hypothesis: p.group for p in pairs}
    trains = {by_reply["The Royal Blue was the B&O's flagship train."], by_reply["The Royal Blue ran from 1890 to 1958."],
              by_reply["Blue is a primary colour."]}
    assert len(trains) == 1  # same snippet (gold + GPT2), and same previous turn with another snippet
    assert by_reply["Football involves kicking a ball."] not in trains


def test_begin_groups_by_knowledge_and_message_and_skips_generic(data_dir):
    pairs = load_begin(data_dir, "wow")
    assert len(pairs) == 3 and {p.source for p in pairs} == {"begin_wow"}
    assert pairs[0].group == pairs[1].group != pairs[2].group
    with pytest.raises(ValueError):
        load_begin(data_dir, "nope")


def test_connected_groups_are_transitive_and_order_free():
    rows = [("k1", "h1"), ("k2", "h1"), ("k2", "h2"), ("k3", "h3"), ("k4", "")]
    g = connected_groups(rows, "x")
    assert g[0] == g[1] == g[2] and len({g[0], g[3], g[4]}) == 3
    assert connected_groups(rows[::-1], "x")[::-1] == g


def _synthetic(n_groups=60, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for g in range(n_groups):
        for k in range(int(rng.integers(1, 6))):
            out.append(JudgedPair(f"evidence {g}", f"reply {g}.{k}", "entailment" if rng.random() < 0.4 else "not_entailment",
                                  f"conv-{g}", "synthetic"))
    return out


def test_harness_splits_never_share_a_conversation():
    pairs = _synthetic()
    fit, scored = fit_scored(pairs)
    assert fit and scored and len(fit) + len(scored) == len(pairs)
    assert not {p.group for p in fit} & {p.group for p in scored}
    in_a = halves(scored)
    a = {p.group for p, m in zip(scored, in_a) if m}
    b = {p.group for p, m in zip(scored, in_a) if not m}
    assert a and b and not a & b
    sub = draw(fit, 10, seed=1)
    assert len(sub) == 10 and set(sub) <= set(fit) and draw(fit, 10, seed=1) == sub
    assert draw(fit, None, seed=1) == fit


def test_certified_coverage_reads_the_threshold_on_the_other_half():
    rng = np.random.default_rng(3)
    gold = (rng.random(400) < 0.4).astype(int)
    p = np.clip(gold * 0.5 + rng.random(400) * 0.5, 0, 1)  # positives above 0.5, negatives below
    in_a = np.arange(400) % 2 == 0
    c = certified_coverage(p, gold, in_a)
    assert c["precision"] >= 85 and c["coverage"] >= 100 * gold.mean()  # every positive shown, few negatives
    assert all(side["threshold"] <= 0.5 for side in c["sides"])
    assert certified_coverage(rng.random(400), gold, in_a)["coverage"] == 0.0  # a useless score certifies nothing


def test_lodo_rows_score_a_set_only_with_models_adapted_without_it():
    """A set (and a set derived from it: TRUE-DialFact from DialFact) that a model was adapted on never
    appears as its left-out row; the seeds' spread is printed beside the change."""
    from lab.nli.adapt_report import lodo_rows

    def forgetting(**aucs):
        return {"limit": 200, "sets": {k: {"auc": v, "n": 200} for k, v in aucs.items()}, "probes": {}}

    rows = [{"key": "shipped", "forgetting": forgetting(dialfact=0.8, true_dialfact=0.88, wice=0.6, faithdial=0.75)}]
    for seed, a in ((1, 0.78), (2, 0.74)):
        rows.append({"key": f"lodo-dialfact-s{seed}", "seed": seed, "left_out": "dialfact", "fit": "faithdial+begin_wow",
                     "weight": 1.0, "forgetting": forgetting(dialfact=a, true_dialfact=a + 0.05, wice=0.61, faithdial=0.9)})
    rows.append({"key": "lodo-wice-s1", "seed": 1, "left_out": "wice", "fit": "dialfact+faithdial", "weight": 1.0,
                 "forgetting": forgetting(dialfact=0.9, true_dialfact=0.95, wice=0.5, faithdial=0.9)})
    got = {tuple(c.strip() for c in r.split("|")[1:4]): r for r in lodo_rows(rows) if r.startswith("| ") and "scored on" not in r}
    assert set(got) == {("faithdial+begin_wow", "1", "dialfact"), ("faithdial+begin_wow", "1", "true_dialfact"),
                        ("faithdial+begin_wow", "1", "wice"), ("dialfact+faithdial", "1", "wice")}
    assert "0.780 / 0.740 | -0.040 | 0.040" in got[("faithdial+begin_wow", "1", "dialfact")]
