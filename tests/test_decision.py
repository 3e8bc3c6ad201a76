"""Decision methods: fit (lab/tuning/fit.py) and decide on window probabilities, versioned JSON
round trip (no pickle), the rule methods equal the verifier's rule, grouped folds keep
conversations apart, and the shipped artifact loads with the current feature set."""
import json
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.unit

from lab.tuning.fit import fit_decision
from workers.decision import FEATURES, LABELS, ClaimEvidence, method
from workers.decision.methods import load
from lab.tuning.cv import cross_validate, folds
from workers.decision import WindowDecision, aggregate, decide_window
from workers.windows import Window

REPO = Path(__file__).resolve().parent.parent


def _claims(n=90, seed=0):
    """Claims whose windows lean to their label, with noise (so fitting has something to learn)."""
    rng = np.random.default_rng(seed)
    evs, ys = [], []
    for i in range(n):
        y = LABELS[i % 3]
        k = int(rng.integers(1, 6))
        base = {"SUPPORTS": [0.6, 0.3, 0.1], "REFUTES": [0.1, 0.3, 0.6], "NOT ENOUGH INFO": [0.2, 0.6, 0.2]}[y]
        p = rng.dirichlet(np.array(base) * 8, size=k)
        evs.append(ClaimEvidence(f"claim {i}", p, np.sort(rng.random(k))[::-1], np.zeros(k, int), [None]))
        ys.append(y)
    return evs, ys


def test_logreg_roundtrip_is_versioned_json(tmp_path):
    evs, ys = _claims()
    layer = fit_decision("logreg", evs, ys)
    path = tmp_path / "decision.json"
    layer.save(path)
    raw = json.loads(path.read_text())
    assert raw["format"] == "dialcheck-decision" and raw["version"] == 1 and raw["params"]["features"] == list(FEATURES)
    again = load(path)
    assert again.predict(evs) == layer.predict(evs)
    assert np.allclose(again.scores(evs).sum(1), 1.0)
    acc = np.mean([p == y for p, y in zip(layer.predict(evs), ys)])
    assert acc > 0.6  # learns the lean (chance is 1/3)


def test_load_rejects_other_formats(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"format": "pickle", "version": 1, "method": "logreg"}))
    with pytest.raises(ValueError):
        load(bad)
    with pytest.raises(ValueError):
        method("forest")


def test_rule_methods_equal_the_verifier_rule():
    evs, _ = _claims(30, seed=1)
    for rule in ("threshold", "argmax"):
        want = [aggregate([WindowDecision(Window(0, ""), p, decide_window(p, rule=rule)) for p in e.probs])[0]
                for e in evs]
        assert fit_decision(rule, evs, [want[0]] * len(evs)).predict(evs) == want


def test_perclass_fits_thresholds_inside_the_grid():
    evs, ys = _claims(60, seed=2)
    layer = fit_decision("perclass", evs, ys)
    assert 0.05 <= layer.params["t_supports"] <= 0.95 and 0.05 <= layer.params["t_refutes"] <= 0.95
    assert set(layer.predict(evs)) <= set(LABELS)


def test_folds_keep_each_conversation_in_one_fold():
    groups = [f"c{i // 3}" for i in range(60)]
    seen = {}
    for k, test in enumerate(folds(groups, 5)):
        for i in test:
            assert seen.setdefault(groups[i], k) == k
    assert sorted(int(i) for t in folds(groups, 5) for i in t) == list(range(60))
    evs, ys = _claims(60, seed=3)
    res = cross_validate(evs, ys, groups, lambda e, y: fit_decision("logreg", e, y), 5)
    assert len(res["folds"]) == 5 and res["mean"] > 40  # learns the lean: chance macro-F1 is ~33


@pytest.mark.model  # parses with spaCy
def test_shipped_layer_loads_with_current_features():
    """The shipped decision.json loads as the typed guarded rule (its params round-trip unchanged)
    and decides as its card says: a reply must be covered, a standalone claim is read as it stands."""
    from dataclasses import replace

    from workers.decision.guarded import GuardedParams

    path = REPO / "workers" / "decision" / "params" / "decision.json"
    raw = json.loads(path.read_text())
    layer = load(path)
    assert layer.name == "guarded" and layer.rule == "layer:guarded"
    assert GuardedParams.from_dict(raw["params"]).to_dict() == raw["params"] == layer.params
    p = layer.typed
    assert (p.cover, p.cover_scope) == ("half", "dialogue") and 0 < p.t_supports < 0.9
    # fitted across domains; the card quotes leave-one-dataset-out numbers
    assert set(layer.meta["lodo"]) == set(layer.meta["fitted_on"]["sets"]) == {
        "dialfact", "hybridial", "foolmetwice", "wice", "true_dialfact", "faithdial"}
    assert (path.parent / "DECISION_CARD.md").exists()

    evidence = "The Eiffel Tower was completed in 1889 for the World's Fair in Paris."

    def ev(claim, probs, reply=True):
        return ClaimEvidence(claim, np.array([probs], float), np.ones(1), np.zeros(1, int), [None], None,
                             [evidence], ["Eiffel Tower"], "", reply)

    entailed = [0.9, 0.08, 0.02]
    stated = layer.decide(ev("The Eiffel Tower was completed in 1889.", entailed))
    assert stated.label == "SUPPORTS" and stated.window == 0 and stated.uncovered == () and stated.evidence == "strong"
    assert stated.numbers == {"coverage": 1.0, "reply": True, "t_supports": p.t_supports, "t_refutes": p.t_refutes,
                              "on_topic": p.on_topic}
    added = ev("The Eiffel Tower was completed in 1889 by Gustave Eiffel.", entailed)
    assert (layer.decide(added).label, layer.decide(added).uncovered) == ("NOT ENOUGH INFO", ("Gustave",))
    assert layer.decide(replace(added, in_dialogue=False)).label == "SUPPORTS"  # cover_scope "dialogue"
    thin = layer.decide(ev("Seems so.", entailed))
    assert thin.label == "NOT ENOUGH INFO" and "too little to check" in thin.note
    refuted = layer.decide(ev("The Eiffel Tower was completed in 1887.", [0.05, 0.1, 0.85]))
    assert refuted.label == "REFUTES" and refuted.probabilities["REFUTES"] == 0.85
    with pytest.raises(ValueError, match="not the shipped rule"):
        method("guarded", {**raw["params"], "slot_refutes": True})


def test_a_fitted_decision_refuses_another_nli_models_probabilities(tmp_path):
    from schemas.settings import DecisionSettings
    from workers.decision import DecisionModelMismatch, load_decision

    path = tmp_path / "decision.json"
    layer = method("guarded", {"t_supports": 0.6, "t_refutes": 0.6, "on_topic": 0.5},
                   {"nli_model": {"version": "nli-a", "fingerprint": "x"}})
    layer.save(path)
    settings = DecisionSettings(method="layer", decision_params=str(path))
    loaded = load_decision(settings, "fv", "nli-a")
    assert loaded.name == "guarded" and loaded.rule == "layer:guarded"
    with pytest.raises(DecisionModelMismatch, match="fitted for NLI model 'nli-a'.*'nli-b'") as raised:
        load_decision(settings, "fv", "nli-b")
    from dialcheck.errors import one_line  # the CLI maps it by type: one line, exit 2

    code, line = one_line(raised.value, None)
    assert code == 2 and line.startswith("decision decision.json was fitted for NLI model 'nli-a'")


def _one_window(e: float, c: float) -> ClaimEvidence:
    p = np.array([[e, 1.0 - e - c, c]])
    return ClaimEvidence("claim", p, np.ones(1), np.zeros(1, int), [None])


def test_the_guarded_fit_holds_its_refutes_floor_per_set_or_pooled():
    """"small" contradicts 10 of its NEI claims at 0.5, so its REFUTES precision is ≤ 50 % at any
    threshold that keeps its real REFUTES; "big" has 40 REFUTES at contradiction 0.46. Per set
    (the default), small's shortfall raises t_refutes above 0.5 for both sets; pooled, REFUTES at
    ≤ 0.46 is right 50 times in 60 (83 %), so big's REFUTES are kept."""
    from lab.tuning.fit import fit_guarded

    big = [_one_window(0.9, 0.05)] * 40 + [_one_window(0.1, 0.46)] * 40
    small = [_one_window(0.1, 0.5)] * 20
    labels = ["SUPPORTS"] * 40 + ["REFUTES"] * 40 + ["NOT ENOUGH INFO"] * 10 + ["REFUTES"] * 10
    sets = ["big"] * 80 + ["small"] * 20
    per_set = fit_decision("guarded", big + small, labels, sets=sets)
    assert per_set.params["t_refutes"] > 0.5 and "refutes_floor" not in per_set.params
    pooled = fit_decision("guarded", big + small, labels, sets=sets, refutes_floor="pooled")
    assert pooled.params["t_refutes"] <= 0.46 and pooled.params["refutes_floor"] == "pooled"
    assert pooled.predict(big[40:]) == ["REFUTES"] * 40
    strict = fit_guarded(big + small, labels, sets, refutes_floor="pooled", min_refutes_precision=0.9)
    assert strict["t_refutes"] > 0.5  # 83 % < 90 %: no REFUTES beats a missed floor
    with pytest.raises(ValueError, match="refutes_floor"):
        fit_guarded(big, labels[:80], refutes_floor="sometimes")


def test_every_method_returns_a_typed_decision_with_its_window_and_numbers():
    """The verdict renders a Decision whatever the method: a label, probabilities over the three
    labels, the deciding window (an index into the claim's windows) and the numbers it quotes."""
    from workers.decision import Decision

    evs, ys = _claims(60, seed=4)
    fitted = {"threshold": method("threshold"), "argmax": method("argmax"),
              "guarded": method("guarded", {"t_supports": 0.5, "t_refutes": 0.5, "on_topic": 0.5}),
              "perclass": fit_decision("perclass", evs, ys), "logreg": fit_decision("logreg", evs, ys)}
    for name, m in fitted.items():
        for ev, d in zip(evs, m.decide_many(evs)):
            assert isinstance(d, Decision) and d.label in LABELS and set(d.probabilities) == set(LABELS)
            assert d.window is not None and 0 <= d.window < ev.n, name
            assert d.evidence in ("strong", "weak"), name  # windows were read
        assert m.predict(evs) == [d.label for d in m.decide_many(evs)]
    d = fitted["guarded"].decide(evs[0])
    assert {"t_supports", "t_refutes", "on_topic", "coverage"} <= set(d.numbers)
    assert {"threshold", "win_gap"} == set(fitted["threshold"].decide(evs[0]).numbers)
    empty = ClaimEvidence("claim", np.zeros((0, 3)), np.zeros(0), np.zeros(0, int), [])
    none = fitted["logreg"].decide(empty)
    assert (none.label, none.window, none.evidence) == ("NOT ENOUGH INFO", None, "none")
    assert none.probabilities == {"SUPPORTS": 0.0, "REFUTES": 0.0, "NOT ENOUGH INFO": 1.0}
