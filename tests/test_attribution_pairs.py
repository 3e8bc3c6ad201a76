"""Attribution pairs (lab/nli/attribution_pairs.py) on hand-made pages: labels must be
right by construction, and every added clause must carry a content term its premise lacks."""
import random

import pytest

from lab.nli.attribution_pairs import (added_terms, attribution_pairs, content_terms, extension_pairs, removal_pairs,
                                       slot_swap_pairs)
from lab.nli.hard_pairs import PageClaim, clean_claim, tokens
from lab.nli.pair_sets import build_hard_pairs
from lab.nli.labels import CONTRADICTION, ENTAILMENT, NEUTRAL

pytestmark = pytest.mark.unit

S, R, N = ENTAILMENT, CONTRADICTION, NEUTRAL
RECORDS = [
    PageClaim("Ada Lovelace", "Ada Lovelace was born in 1815 .",
              "Ada Lovelace was born on 10 December 1815 in London .", S, "t"),
    PageClaim("Ada Lovelace", "Ada Lovelace was born in London .",
              "Ada Lovelace was born in London , the only legitimate child of Lord Byron .", S, "t"),
    PageClaim("Ada Lovelace", "Ada Lovelace worked with Charles Babbage on his Analytical Engine .",
              "She worked with Charles Babbage on the Analytical Engine , and her notes on it are famous .", S, "t"),
    PageClaim("Ada Lovelace", "Ada Lovelace wrote the first published algorithm in 1843 .",
              "In 1843 she published notes with what is seen as the first algorithm for a machine .", S, "t"),
    PageClaim("Ada Lovelace", "Ada Lovelace died on 27 November 1852 .",
              "She died of uterine cancer on 27 November 1852 , at the age of 36 .", S, "t"),
    PageClaim("Mary Somerville", "Mary Somerville was born in Jedburgh .",
              "Mary Somerville was born in Jedburgh , Scotland , on 26 December 1780 .", S, "t"),
    PageClaim("Mary Somerville", "Mary Somerville wrote a bestselling book of mathematics in 1834 .",
              "She wrote On the Connexion of the Physical Sciences , a bestselling book published in 1834 .", S, "t"),
    PageClaim("Mary Somerville", "Mary Somerville died in Naples in 1872 .",
              "She died in Naples on 29 November 1872 , aged 91 .", S, "t"),
    PageClaim("Mary Somerville", "Mary Somerville was elected to the Royal Astronomical Society in 1835 .",
              "In 1835 she and Caroline Herschel were the first women elected to the Royal Astronomical Society .", S, "t"),
    PageClaim("Jaws (film)", "Jaws was directed by Steven Spielberg .",
              "Jaws is a 1975 thriller film directed by Steven Spielberg , based on a novel by Peter Benchley .", S, "t"),
    PageClaim("Jaws (film)", "Jaws was released in June 1975 .",
              "It was released on June 20 , 1975 , by Universal Pictures .", S, "t"),
    PageClaim("Jaws (film)", "Jaws grossed over $ 470 million .",
              "The film grossed more than $ 470 million worldwide .", R, "t"),
    PageClaim("Alien (film)", "Alien was directed by Ridley Scott .",
              "Alien is a 1979 science fiction horror film directed by Ridley Scott .", S, "t"),
    # supported by fiat (test only): the evidence does not state the name, so it is never swapped
    PageClaim("Alien (film)", "Alien was produced by Walter Hill .",
              "Alien is a 1979 film with Sigourney Weaver , and it was a commercial success .", S, "t"),
    PageClaim("Alien (film)", "Alien was released in May 1979 .",
              "It was released in the United States on May 25 , 1979 .", S, "t"),
]
EVIDENCE = {clean_claim(r.evidence): r for r in RECORDS}
PAGE_OF_SENTENCE = {clean_claim(r.evidence): r.page for r in RECORDS}


def _source_claim(hyp: str) -> PageClaim:
    """The supported record whose claim the hypothesis starts with."""
    for r in RECORDS:
        c = clean_claim(r.claim).rstrip(".")
        if hyp.startswith(c) or hyp.startswith(c[0].lower() + c[1:]):
            return r
    raise AssertionError(f"no claim of the pages starts {hyp!r}")


def test_content_terms_and_added_terms():
    assert content_terms("and it has 40 floors") == {"40", "floors"}
    assert added_terms("and it has 40 floors", "The tower has 40 floors .") == set()
    assert added_terms("and it has 40 floors", "The tower has 41 floor .") == {"40"}  # stems: floor ~ floors
    assert added_terms(", which was designed by Gustave Eiffel", "Gustave Eiffel designed the tower .") == set()
    assert added_terms(", which was designed by Gustave Eiffel", "The tower is in Paris .") == {"designed", "gustave", "eiffel"}


def test_extensions_are_neutral_add_a_content_term_and_keep_the_supported_claim_and_its_evidence():
    pairs = extension_pairs(RECORDS * 3, random.Random(0), n=200)
    assert len(pairs) >= 10
    assert {p.source for p in pairs} >= {"attr_extension_same_page", "attr_extension_other_page", "attr_extension_opinion"}
    for p in pairs:
        assert p.label == N
        r = _source_claim(p.hypothesis)
        assert r.label == S and p.premise == clean_claim(r.evidence)  # premise = the claim's own evidence
        claim = clean_claim(r.claim).rstrip(".")
        clause = p.hypothesis[len(claim):]
        assert clause.startswith(", ") and added_terms(clause, p.premise), (p.hypothesis, p.premise)
    # a clause of another page is about the claim's subject (its pronoun), not the other page's subject
    other = [p for p in pairs if p.source == "attr_extension_other_page"]
    assert other and all(", and she " in p.hypothesis or ", and it " in p.hypothesis or ", and he " in p.hypothesis
                         for p in other)


def test_an_extension_whose_clause_the_premise_states_is_not_built():
    # The other claim of the page has its own evidence, but the premise states all of it already
    # ("built in 1931"): the clause adds no content term, so no neutral pair is made from it.
    ev = ("Tower , a skyscraper in the old harbour district of the city with offices and shops , has 40 floors "
          "and was built in 1931 .")
    recs = [PageClaim("Tower", "Tower has 40 floors .", ev, S, "t"),
            PageClaim("Tower", "Tower was built in 1931 .", "Construction ended in 1931 .", S, "t")]
    pairs = [p for p in extension_pairs(recs * 5, random.Random(1), n=50) if p.source == "attr_extension_same_page"]
    assert all(not p.premise.startswith("Tower, a skyscraper") for p in pairs), pairs
    # the other way round the clause ("40 floors") is new to the premise: built
    assert any(p.hypothesis == "Tower was built in 1931, and it has 40 floors." for p in pairs)


def test_slot_swaps_change_a_name_or_month_the_evidence_states_in_that_slot():
    pairs = slot_swap_pairs(RECORDS * 2, random.Random(0), n=100)
    kinds = {p.source for p in pairs}
    assert kinds == {"attr_slot_swap_name", "attr_slot_swap_month"}, kinds
    for p in pairs:
        assert p.label == R
        r = EVIDENCE[p.premise]
        claim = clean_claim(r.claim)
        assert p.hypothesis != claim and r.label == S
        removed = tokens(claim) - tokens(p.hypothesis)
        added = tokens(p.hypothesis) - tokens(claim)
        assert removed and removed <= tokens(p.premise)  # the original value is stated by the evidence
        assert added and not added & tokens(p.premise)  # the new one is not
    names = [p for p in pairs if p.source == "attr_slot_swap_name"]
    # "directed by Steven Spielberg" becomes another director (seen after 'directed by' on another page),
    # never a place; the page's own subject is never swapped
    for p in names:
        if p.hypothesis.startswith("Jaws was directed by"):
            assert p.hypothesis in ("Jaws was directed by Ridley Scott.", "Jaws was directed by Walter Hill.")
        assert "Jedburgh" not in p.hypothesis or "born in" in p.hypothesis
        assert "Walter Hill" not in p.premise
    assert any(p.hypothesis.startswith("Jaws was directed by") for p in names)
    assert any(p.hypothesis.startswith("Ada Lovelace was born in ") and "London" not in p.hypothesis for p in names)


def test_slot_swaps_skip_comparisons_a_changed_month_can_leave_true():
    recs = [PageClaim("Jaws (film)", "Jaws was released before June 1976 .",
                      "It was released on June 20 , 1975 , by Universal Pictures .", S, "t")]
    assert slot_swap_pairs(recs, random.Random(0), n=10) == []


def test_removals_drop_the_supporting_sentence_and_keep_only_windows_missing_a_key_term():
    pairs = removal_pairs(RECORDS, random.Random(0), n=100)
    neutral = [p for p in pairs if p.source == "hard_attr_removal"]
    twins = [p for p in pairs if p.source == "attr_window_support"]
    assert neutral and len(neutral) == len(twins)
    own = {clean_claim(r.claim): clean_claim(r.evidence) for r in RECORDS}
    for p, t in zip(neutral, twins):
        assert p.label == N and t.label == S and p.hypothesis == t.hypothesis
        ev = own[p.hypothesis]
        assert ev not in p.premise and ev in t.premise  # the one supporting sentence dropped / kept
        assert len(t.premise) > len(p.premise)
        assert content_terms(p.hypothesis) - tokens(p.premise)  # some key term of the claim is gone
        pages = {PAGE_OF_SENTENCE[s] for s in PAGE_OF_SENTENCE if s in p.premise}
        assert pages == {EVIDENCE[ev].page}  # the rest of the window is the claim's own page


def test_a_window_that_still_holds_every_key_term_is_not_a_removal():
    # The other sentences of the page restate every key term of the claim: not neutral by construction.
    recs = [PageClaim("Ada Lovelace", "Ada Lovelace was born in 1815 .", "Ada Lovelace was born in 1815 in London .", S, "t"),
            PageClaim("Ada Lovelace", "x", "Records of the parish in the north list Ada Lovelace among the children "
                                           "who were born in 1815 , a famous year for the family .", S, "t"),
            PageClaim("Ada Lovelace", "y", "Her mother and her tutors taught the young girl mathematics and music at "
                                           "home during the long winters .", S, "t")]
    # the same page with the first sentence replaced by one that lacks '1815': a removal is made
    recs2 = [recs[0], PageClaim("Ada Lovelace", "x", "Records of the parish in the north list Ada Lovelace among the "
                                                     "children who were born that year , a famous one for the family .", S, "t"), recs[2]]
    assert [p for p in removal_pairs(recs2, random.Random(0), n=10) if p.hypothesis.startswith("Ada Lovelace was born")]
    assert [p for p in removal_pairs(recs, random.Random(0), n=10) if p.hypothesis.startswith("Ada Lovelace was born")] == []


def test_attribution_pairs_wrap_a_share_in_chat_templates_and_keep_labels():
    base = attribution_pairs(RECORDS * 3, random.Random(4), 60, 60, 60, wrap_share=0.0)
    wrapped = attribution_pairs(RECORDS * 3, random.Random(4), 60, 60, 60, wrap_share=1.0)
    assert len(base) == len(wrapped) and base
    assert [p.label for p in base] == [p.label for p in wrapped]
    assert all(w.hypothesis != b.hypothesis for b, w in zip(base, wrapped))
    assert attribution_pairs(RECORDS, random.Random(4)) == []  # nothing asked, nothing built


def test_hard_pairs_are_unchanged_when_the_new_kinds_are_not_asked(data_dir):
    """The other pairs are identical with and without attribution pairs (their own rng)."""
    without = build_hard_pairs(data_dir, 300, 300, 300, seed=13)
    with_ = build_hard_pairs(data_dir, 300, 300, 300, seed=13, n_extensions=50, n_slot_swaps=50, n_removals=50)
    assert with_[:len(without)] == without
    extra = with_[len(without):]
    assert extra and all(p.source.startswith(("attr_", "hard_attr_")) for p in extra)
