"""NLI v3 training pairs and the silent-evidence probe (lab/nli/hard_pairs.py).

Builders run on small hand-made pages (labels must be right by construction); the source and
hold-out rules run on the real data in ../shared/data."""
import random

import numpy as np
import pytest

from lab.nli.data import NLIPair
from lab.nli.hard_pairs import (EVALUATION_FILES, PageClaim, clean_claim, dialogue_pairs, filter_pairs, is_probe_page,
                                    nearest_page_pairs, page_claims, same_event_contradiction, same_page_pairs,
                                    silent_probe, source_files)
from lab.nli.labels import CONTRADICTION, ENTAILMENT, NEUTRAL

S, R = ENTAILMENT, CONTRADICTION
ADA_CLAIM = "Ada Lovelace was born in 1815 ."
ADA_EV = "Ada Lovelace was born on 10 December 1815 in London ."
ADA_REVISION = "Ada Lovelace was born on 10 December 1816 in London ."  # another revision of ADA_EV
RECORDS = [
    PageClaim("Ada Lovelace", ADA_CLAIM, ADA_EV, S, "t"),
    PageClaim("Ada Lovelace", "Ada Lovelace was born in 1816 .", ADA_REVISION, S, "t"),
    PageClaim("Ada Lovelace", "Ada Lovelace worked with Charles Babbage .",
              "She worked with Charles Babbage on the Analytical Engine , and her notes on it are famous .", S, "t"),
    PageClaim("Ada Lovelace", "Ada Lovelace was the daughter of Lord Byron .",
              "She was the only legitimate child of the poet Lord Byron and Lady Byron .", S, "t"),
    PageClaim("Mary Somerville", "Mary Somerville was born in 1780 .",
              "Mary Somerville was born on 26 December 1780 in Jedburgh , Scotland .", S, "t"),
    PageClaim("Mary Somerville", "Mary Somerville wrote about physical sciences .",
              "She wrote On the Connexion of the Physical Sciences , a bestselling book of mathematics .", S, "t"),
    PageClaim("Halley 's Comet", "Halley 's Comet returns every 76 years .",
              "Halley 's Comet is visible from Earth every 75 to 76 years .", S, "t"),
    PageClaim("Halley 's Comet", "Halley 's Comet last appeared in 1986 .",
              "It last appeared in the inner Solar System in 1986 and will next appear in mid-2061 .", R, "t"),
]


@pytest.mark.unit
def test_same_page_pairs_are_neutral_and_never_the_claims_own_evidence_or_its_revision():
    pairs = same_page_pairs(RECORDS, random.Random(0), per_claim=3)
    assert pairs and all(p.label == NEUTRAL and p.source == "hard_same_page" for p in pairs)
    ada = [p for p in pairs if p.hypothesis == "Ada Lovelace was born in 1815."]
    assert ada, "the Ada claim gets a silent sentence of its own page"
    for p in ada:
        assert "1815" not in p.premise and "1816" not in p.premise  # own evidence and its revision excluded
        assert "Babbage" in p.premise or "Byron" in p.premise
    claim_page = {clean_claim(r.claim): r.page for r in RECORDS}
    for p in pairs:  # the sentence comes from the claim's own page
        assert _page_of_sentence()[p.premise] == claim_page[p.hypothesis]


def _page_of_sentence():
    return {clean_claim(r.evidence): r.page for r in RECORDS}


@pytest.mark.unit
def test_nearest_page_pairs_use_another_entity_of_the_same_type_and_never_name_the_subject():
    pairs = nearest_page_pairs(RECORDS, random.Random(0), per_page=4)
    assert pairs and all(p.label == NEUTRAL and p.source == "hard_nearest_page" for p in pairs)
    claim_page = {clean_claim(r.claim): r.page for r in RECORDS}
    for p in pairs:
        assert _page_of_sentence()[p.premise] != claim_page[p.hypothesis]
        assert claim_page[p.hypothesis].split()[0] not in p.premise  # the subject is never named
    # the nearest page of one 19th-century mathematician is the other one, not the comet
    ada = [p for p in pairs if claim_page[p.hypothesis] == "Ada Lovelace"]
    assert ada and all(_page_of_sentence()[p.premise] == "Mary Somerville" for p in ada)


@pytest.mark.unit
def test_random_page_probe_pairs_come_from_other_pages():
    pairs = nearest_page_pairs(RECORDS, random.Random(1), per_page=2, random_page=True)
    assert pairs and all(p.label == NEUTRAL and p.source == "hard_random_page" for p in pairs)
    for p in pairs:
        assert p.hypothesis.split()[0] not in p.premise


@pytest.mark.unit
def test_dialogue_variants_keep_the_label_and_the_claim():
    pairs = dialogue_pairs(RECORDS * 10, random.Random(3), n=60)
    assert len(pairs) == 60
    label_of = {clean_claim(r.evidence): (r.label, clean_claim(r.claim).rstrip(" .")) for r in RECORDS}
    for p in pairs:
        label, claim = label_of[p.premise]
        assert p.label == label  # label kept
        if p.source != "dialogue_pronoun":
            assert claim in p.hypothesis and p.hypothesis != claim + "."
    kinds = {p.source for p in pairs}
    assert {"dialogue_hedge", "dialogue_first_person", "dialogue_chitchat", "dialogue_pronoun"} <= kinds
    pron = {p.hypothesis for p in pairs if p.source == "dialogue_pronoun"}
    assert pron <= {"She was born in 1815.", "She was born in 1816.", "She worked with Charles Babbage.",
                    "She was the daughter of Lord Byron.", "She wrote about physical sciences.",
                    "She was born in 1780.", "It returns every 76 years.", "It last appeared in 1986."}


class _Fixed:
    """Stands in for an NLI model where only the arithmetic of the caller is under test."""

    def __init__(self, probs):
        self.probs = np.asarray(probs, dtype=float)

    def predict(self, premises, hypotheses):
        assert len(premises) == len(hypotheses) == len(self.probs)
        return self.probs


@pytest.mark.unit
def test_filter_drops_only_confident_entailment():
    pairs = [NLIPair(str(i), str(i), NEUTRAL, "hard_same_page") for i in range(3)]
    kept, dropped = filter_pairs(pairs, _Fixed([[0.9, 0.05, 0.05], [0.5, 0.1, 0.4], [0.1, 0.1, 0.8]]))
    assert dropped == 1 and [p.premise for p in kept] == ["1", "2"]


@pytest.mark.unit
def test_silent_probe_rates():
    pairs = [NLIPair("p", "h", NEUTRAL, k) for k in ("hard_same_page",) * 2 + ("hard_random_page",) * 2]
    probs = [[0.1, 0.3, 0.6], [0.1, 0.8, 0.1], [0.3, 0.2, 0.5], [0.5, 0.05, 0.45]]
    out = silent_probe(_Fixed(probs), pairs, threshold=0.55)
    assert out["pairs"] == 4
    assert out["false_contradiction_argmax"] == 0.5  # rows 0 and 2
    assert out["false_contradiction_p55"] == 0.25  # only row 0 reaches 0.55
    assert out["by_kind"]["hard_same_page"]["false_contradiction_argmax"] == 0.5
    assert out["by_kind"]["hard_random_page"]["false_contradiction_p55"] == 0.0


@pytest.mark.unit
def test_same_event_contradictions_are_recognised():
    assert same_event_contradiction(NLIPair("A man inspects the uniform of a figure.", "The dog is sleeping.", R, "mpe"))
    assert not same_event_contradiction(NLIPair("A man inspects the uniform.", "A man is sleeping.", R, "mpe"))
    assert not same_event_contradiction(NLIPair("A man inspects the uniform.", "The dog is sleeping.", NEUTRAL, "mpe"))
    assert not same_event_contradiction(NLIPair("Born 1815.", "Died 1852.", R, "vitaminc_real"))


@pytest.fixture(scope="module")
def real_records(data_dir):
    return page_claims(data_dir)


@pytest.mark.unit
def test_builders_read_no_evaluation_set(data_dir, real_records):
    for f in source_files(data_dir):
        assert f.exists()
        assert not any(e in str(f.relative_to(data_dir)) for e in EVALUATION_FILES)
    assert real_records and {r.source for r in real_records} == {"vitaminc_real", "vitaminc_synthetic"}


@pytest.mark.unit
def test_probe_pages_are_held_out(real_records):
    probe = {r.page for r in real_records if is_probe_page(r.page)}
    train = {r.page for r in real_records if not is_probe_page(r.page)}
    assert probe and train and not probe & train
    assert 0.05 < len(probe) / (len(probe) + len(train)) < 0.15


@pytest.mark.unit
def test_page_swap_probe_pairs_claims_with_another_pages_sentences(data_dir):
    from workers.jsonl import read_jsonl
    from lab.nli.hard_pairs import page_swap_probe_pairs

    rows = list(read_jsonl(data_dir / "foolmetwice" / "dev.jsonl"))
    page_of_claim = {r["text"].strip(): r["wikipedia_page"] for r in rows}
    page_sents = {}
    for r in rows:
        for e in r.get("retrieved_evidence", []) + r.get("gold_evidence", []):
            page_sents.setdefault(e["text"], set()).add(r["wikipedia_page"])
    pairs = page_swap_probe_pairs(data_dir, n=50)
    assert len(pairs) >= 45 and all(p.label == NEUTRAL for p in pairs)
    for p in pairs:
        own = page_of_claim[p.hypothesis]
        assert not any(own in page_sents.get(s, set()) and len(page_sents[s]) == 1
                       for s in page_sents if s in p.premise)


@pytest.mark.model
def test_nli_evaluate_reports_the_probes(capsys, data_dir):
    import json

    from dialcheck.cli import main

    assert main(["nli", "evaluate", "--limit", "30", "--json", "--data-dir", str(data_dir)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["silent_probe"]["pairs"] == 90 and set(out["silent_probe"]["by_kind"]) == {
        "hard_same_page", "hard_nearest_page", "hard_random_page"}
    assert out["silent_probe_false_contradiction"] == out["silent_probe"]["false_contradiction_argmax"]
    # P(contradiction) >= 0.55 makes contradiction the argmax, so the p55 rate never exceeds the argmax rate
    assert 0.0 <= out["silent_probe_false_contradiction_p55"] <= out["silent_probe_false_contradiction"]
    assert out["swap_probe_pairs"] >= 27 and 0.0 <= out["swap_probe_false_contradiction"] <= 1.0


@pytest.mark.unit
def test_value_swap_changes_a_value_the_evidence_states_and_labels_it_contradiction():
    from lab.nli.hard_pairs import value_swap_pairs

    pairs = value_swap_pairs(RECORDS, random.Random(0), n=20)
    assert pairs and all(p.label == CONTRADICTION and p.source == "contrast_value_swap" for p in pairs)
    by_evidence = {clean_claim(r.evidence): clean_claim(r.claim) for r in RECORDS if r.label == S}
    for p in pairs:
        original = by_evidence[p.premise]
        assert p.hypothesis != original
        changed = set(p.hypothesis.split()) - set(original.split())
        assert len(changed) == 1 and changed.pop().rstrip(".") not in p.premise  # one value, absent from the evidence
    # a refuted claim is never the source of a swap (its changed value could be the true one)
    assert not any("Halley" in p.hypothesis and "appeared" in p.hypothesis for p in pairs)


@pytest.mark.unit
def test_value_swap_skips_comparative_claims_a_changed_value_can_leave_true():
    from lab.nli.hard_pairs import value_swap_pairs

    recs = [PageClaim("X", "X has more than 5 members .", "X has 7 members , and 5 of them are founders .", S, "t")]
    assert value_swap_pairs(recs, random.Random(0), n=5) == []


@pytest.mark.unit
def test_same_page_number_pairs_state_another_value_elsewhere_on_the_page_and_are_neutral():
    from lab.nli.hard_pairs import same_page_number_pairs

    recs = RECORDS + [PageClaim("Ada Lovelace", "Ada Lovelace died in 1852 .",
                                "Ada Lovelace died of uterine cancer in 1852 , aged 36 .", S, "t")]
    pairs = same_page_number_pairs(recs, random.Random(0), n=20)
    assert pairs and all(p.label == NEUTRAL and p.source == "hard_same_page_number" for p in pairs)
    for p in pairs:
        own = {clean_claim(r.evidence) for r in recs if clean_claim(r.claim) == p.hypothesis}
        assert p.premise not in own
        claim_years = {w for w in p.hypothesis.split() if w.rstrip(".").isdigit()}
        assert not claim_years & set(p.premise.split())  # a different value, not the claim's own
    died = [p for p in pairs if p.hypothesis == "Ada Lovelace died in 1852."]
    assert died and all("born" in p.premise for p in died)  # a birth sentence (another year), never its own evidence
