"""Windows, lexical pre-score, decision rule and aggregation (pure functions)."""
import numpy as np
import pytest

from lab.evaluation.scoring import label_metrics, retrieval_metrics
from workers.text import with_context
from workers.decision import WindowDecision, aggregate, decide_window
from workers.windows import Window, prescore, top_windows, windows

pytestmark = pytest.mark.unit


def test_windows_are_sentences_and_bisentences():
    w = windows("Elvis was born in Tupelo. He moved to Memphis. He died in 1977.")
    assert w[:3] == ["Elvis was born in Tupelo.", "He moved to Memphis.", "He died in 1977."]
    assert "Elvis was born in Tupelo. He moved to Memphis." in w
    assert len(w) == 5


def test_prescore_prefers_overlapping_window():
    fact = "Elvis was born in Tupelo"
    assert prescore("Elvis Presley was born in Tupelo, Mississippi.", fact) > prescore("He died in Memphis.", fact)
    assert prescore("Élvis wás bórn in Tupelo", fact) == prescore("Elvis was born in Tupelo", fact)  # diacritics stripped


def test_top_windows_keeps_the_best_by_prescore():
    """Which windows are kept, not how many: every window of the passage about topic 3 first (the one
    sentence naming both "number 3" and "topic 3" at the top), nothing dropped outscoring anything
    kept, and equal scores in passage order."""
    passages = [" ".join(f"Sentence number {i} about topic {j}." for i in range(10)) for j in range(5)]
    kept = top_windows(passages, "topic 3", keep=24)
    assert len(kept) == 24
    assert kept[0].text == "Sentence number 3 about topic 3." and kept[0].passage_index == 3
    about_3 = windows(passages[3])
    assert sorted(w.text for w in kept[:len(about_3)]) == sorted(about_3)
    scores = [w.prescore for w in kept]
    assert scores == sorted(scores, reverse=True)
    every = [(i, w) for i, p in enumerate(passages) for w in windows(p)]
    dropped = [prescore(w, "topic 3") for i, w in every if (i, w) not in {(k.passage_index, k.text) for k in kept}]
    assert len(dropped) == len(every) - 24 and max(dropped) <= min(scores)
    for a, b in zip(kept, kept[1:]):
        if a.prescore == b.prescore:
            assert a.passage_index <= b.passage_index, (a, b)


def test_decision_rule_thresholds():
    assert decide_window(np.array([0.60, 0.30, 0.10])) == "SUPPORTS"
    assert decide_window(np.array([0.56, 0.44, 0.00])) == "NOT ENOUGH INFO"  # gap 0.12 < 0.15
    assert decide_window(np.array([0.50, 0.10, 0.40])) == "NOT ENOUGH INFO"  # below 0.55
    assert decide_window(np.array([0.10, 0.20, 0.70])) == "REFUTES"
    assert decide_window(np.array([0.2, 0.6, 0.2])) == "NOT ENOUGH INFO"
    assert decide_window(np.array([0.45, 0.30, 0.25]), rule="argmax") == "SUPPORTS"
    assert decide_window(np.array([0.30, 0.30, 0.40]), rule="argmax") == "REFUTES"


def test_aggregate_most_confident_decisive_window_wins():
    mk = lambda p: WindowDecision(Window(0, "w"), np.array(p), decide_window(np.array(p)))
    label, best = aggregate([mk([0.2, 0.7, 0.1]), mk([0.7, 0.2, 0.1]), mk([0.05, 0.1, 0.85])])
    assert label == "REFUTES" and best.probs[2] == 0.85
    assert aggregate([mk([0.3, 0.4, 0.3])])[0] == "NOT ENOUGH INFO"
    assert aggregate([])[0] == "NOT ENOUGH INFO"


def test_hypothesis_uses_last_turns():
    assert with_context(["a", "b", "c"], "claim", 2) == "b c claim"
    assert with_context(["a"], "claim", 0) == "claim"


def test_label_metrics_known_values():
    m = label_metrics(["SUPPORTS", "REFUTES", "NOT ENOUGH INFO", "SUPPORTS"],
                      ["SUPPORTS", "SUPPORTS", "NOT ENOUGH INFO", "SUPPORTS"])
    assert m["accuracy"] == 75.0
    assert m["f1"]["REFUTES"] == 0.0 and m["f1"]["NOT ENOUGH INFO"] == 100.0
    assert m["f1"]["SUPPORTS"] == 80.0


def test_retrieval_metrics_known_values():
    m = retrieval_metrics([{"A"}, {"B"}], [["A", "C"], ["C", "D"]], [1, 2])
    assert m["@1"]["macro_recall"] == 50.0 and m["@2"]["zero_hit_rate"] == 50.0
    assert m["@1"]["ndcg"] == 50.0


def test_title_in_premise_prefixes_the_passage_title_only_when_set():
    """windows.title_in_premise: the NLI reads 'Title. window' (a window naming its subject only by a
    pronoun is then about that subject); off by default (measured mixed across sets, README)."""
    from types import SimpleNamespace

    import pytest

    from schemas.protocols import Passage
    from schemas.settings import load_settings
    from workers.stages import VerifyStage, premise

    class Seen(Exception):
        pass

    class RecordingNLI:
        def predict(self, premises, hypotheses):
            raise Seen(premises)

    state = SimpleNamespace(item=SimpleNamespace(context=[]), fv_surface=SimpleNamespace(text="He was born in Tupelo."),
                            passages=[Passage("p0", "Elvis Presley", "He was born in Tupelo, Mississippi.")])
    seen = {}
    for on in (False, True):
        stage = VerifyStage(RecordingNLI(), load_settings(windows={"title_in_premise": on}).windows, decision=None)
        with pytest.raises(Seen) as e:
            stage.run([state])
        seen[on] = e.value.args[0]
    assert seen[False] == ["He was born in Tupelo, Mississippi."]
    assert seen[True] == ["Elvis Presley. He was born in Tupelo, Mississippi."]
    # a window already opening with its title, or a passage without one, is read as it is
    assert premise(Window(0, "Elvis Presley was a singer."), ["Elvis Presley"]) == "Elvis Presley was a singer."
    assert premise(Window(0, "He sang."), [""]) == "He sang."
