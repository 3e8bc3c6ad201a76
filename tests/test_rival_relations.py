"""Functional relations as data (workers/decision/relations.py): each relation parses the way a
claim and a knowledge-base sentence state it, says which end has one filler, and only an exclusive
relation's other filler is a rival."""
from __future__ import annotations

import pytest

from workers.decision.relations import (BY_NAME, RELATIONS, End, claim_relation, masked_query, rivals, statements,
                                       with_owner)

pytestmark = pytest.mark.unit

# relation → (a sentence stating it, its subject, its object, which end is functional)
STATED = {
    "capital_of": ("Paris is the capital and largest city of France, with 2 million people.", "Paris", "France", End.SUBJECT),
    "born_in": ("Albert Einstein was born in Ulm.", "Albert Einstein", "Ulm", End.OBJECT),
    "born_on": ("Ada Lovelace was born on 10 December 1815.", "Ada Lovelace", "10 December 1815", End.OBJECT),
    "died_in": ("Albert Einstein died in Princeton.", "Albert Einstein", "Princeton", End.OBJECT),
    "located_in": ("Paris is in Europe.", "Paris", "Europe", End.NEITHER),
    "city_in": ("Lyon is a city in France.", "Lyon", "France", End.NEITHER),
    "member_of": ("Germany is a founding member of the European Union.", "Germany", "the European Union", End.NEITHER),
    "founded_in": ("Rome was founded in 753.", "Rome", "753", End.OBJECT),
    "completed_in": ("The Eiffel Tower was completed in 1889.", "The Eiffel Tower", "1889", End.OBJECT),
    "built_in": ("The Colosseum was built in 80.", "The Colosseum", "80", End.OBJECT),
    "author_of": ("Pride and Prejudice is a novel by English author Jane Austen.", "Pride and Prejudice", "Jane Austen",
                  End.OBJECT),
    "director_of": ("Psycho was directed by Alfred Hitchcock.", "Psycho", "Alfred Hitchcock", End.OBJECT),
    "composer_of": ("Ludwig van Beethoven composed the Moonlight Sonata.", "the Moonlight Sonata", "Ludwig van Beethoven",
                    End.OBJECT),
    "discoverer_of": ("In 1928, Alexander Fleming discovered penicillin.", "penicillin", "Alexander Fleming", End.OBJECT),
    "inventor_of": ("The telephone was invented by Alexander Graham Bell.", "The telephone", "Alexander Graham Bell",
                    End.OBJECT),
    "founder_of": ("Microsoft was founded by Bill Gates.", "Microsoft", "Bill Gates", End.NEITHER),
    "population_of": ("Lyon has a population of 522,000.", "Lyon", "522,000", End.OBJECT),
    "height_of": ("The Eiffel Tower is 330 metres tall.", "The Eiffel Tower", "330 metres", End.OBJECT),
    "length_of": ("The Nile is 6,650 km long.", "The Nile", "6,650 km", End.OBJECT),
    "area_of": ("Paris covers an area of 105 km2.", "Paris", "105 km2", End.OBJECT),
}


def test_every_relation_has_a_parse_test():
    assert set(STATED) == {r.name for r in RELATIONS}


@pytest.mark.parametrize("name", sorted(STATED))
def test_a_relation_parses_as_it_is_stated(name):
    text, subject, obj, end = STATED[name]
    found = [(s.subject, s.object) for s in statements(text) if s.relation.name == name]
    assert found and found[0] == (subject, obj)
    assert BY_NAME[name].functional is end and BY_NAME[name].exclusive == (end is not End.NEITHER)


def test_the_capital_of_a_country_has_one_rival_and_the_claim_s_own_is_none():
    claim = claim_relation("Munich is the capital of Germany.")
    found = rivals(claim, ("Berlin is the capital and largest city of Germany.",
                           "Munich is the capital and most populous city of Bavaria, Germany."))
    assert [(s.subject, text[:6]) for s, text in found] == [("Berlin", "Berlin")]
    assert rivals(claim_relation("Berlin is the capital of Germany."),
                  ("Berlin is the capital and largest city of Germany.",)) == []


def test_an_author_is_read_past_the_words_that_describe_them():
    [s] = statements("The Wealth of Nations is a book by the Scottish economist Adam Smith.")
    assert (s.subject, s.object) == ("The Wealth of Nations", "Adam Smith")


def test_a_work_s_author_named_by_a_part_of_the_name_is_no_rival():
    window = ("The Tragedy of Hamlet, Prince of Denmark, often shortened to Hamlet, is a tragedy written by "
              "William Shakespeare sometime between 1599 and 1601.")
    assert rivals(claim_relation("Hamlet was written by Shakespeare."), (window,)) == []
    assert [s.object for s, _ in rivals(claim_relation("Hamlet was written by Christopher Marlowe."), (window,))] == \
        ["William Shakespeare"]


def test_the_fixed_end_must_be_the_very_same_filler():
    # found by the rival-query prototype: "Wales" is not "New South Wales", so Cardiff is no rival
    claim = claim_relation("Sydney is the capital of New South Wales.")
    assert rivals(claim, ("Cardiff is the capital and largest city of Wales.",)) == []
    assert rivals(claim_relation("Sydney is the capital of Australia."),
                  ("Perth is the capital of Western Australia.",)) == []


@pytest.mark.parametrize("claim,window", [
    ("Lyon is a city in France.", "Lyon is a city in Switzerland."),
    ("Paris is in Europe.", "Paris is in France."),
    ("Germany is a member of NATO.", "Germany is a member of the European Union."),
    ("Microsoft was founded by Bill Gates.", "Microsoft was founded by Paul Allen."),
])
def test_a_relation_with_many_fillers_never_has_a_rival(claim, window):
    assert rivals(claim_relation(claim), (window,)) == []


def test_a_quantity_is_left_to_the_slot_check():
    claim = claim_relation("The Eiffel Tower was completed in 1887.")
    assert claim.relation.quantity and rivals(claim, ("The Eiffel Tower was completed in 1889.",)) == []


def test_a_claim_without_a_functional_relation_parses_to_none():
    assert claim_relation("The Moon is made of cheese.") is None


def test_the_passage_s_own_subject_stands_for_the_country_s_capital():
    # "Tokyo is the country's capital" in the passage about Japan states Japan's capital
    claim = claim_relation("Kyoto is the capital of Japan.")
    window = with_owner("Tokyo is the country's capital and largest city.", "Japan")
    assert [s.subject for s, _ in rivals(claim, (window,))] == ["Tokyo"]
    assert with_owner("Its capital is Ankara.", "") == "Its capital is Ankara."  # no title: nothing put there


@pytest.mark.parametrize("sentence", ["Lyon is the gastronomic capital of France.",
                                      "Cape Town is the legislative capital of South Africa."])
def test_a_capital_of_one_kind_is_no_rival(sentence):
    # a country may have several: the cultural, the legislative capital
    assert rivals(claim_relation("Paris is the capital of France."), (sentence,)) == []
    assert rivals(claim_relation("Pretoria is the capital of South Africa."), (sentence,)) == []


def test_the_capital_and_largest_city_in_a_country_is_its_capital():
    claim = claim_relation("Kyoto is the capital of Japan.")
    assert [s.subject for s, _ in rivals(claim, ("Tokyo is the capital and most populous city in Japan.",))] == ["Tokyo"]


def test_the_masked_query_takes_out_the_varied_end():
    assert masked_query(claim_relation("Istanbul is the capital of Turkey."), "Istanbul is the capital of Turkey.") \
        == "is the capital of Turkey."
    assert masked_query(claim_relation("Einstein was born in Paris."), "Einstein was born in Paris.") == "Einstein was born in ."
    assert masked_query(claim_relation("Lyon is a city in France."), "Lyon is a city in France.") is None  # many fillers


def test_the_verdict_schema_names_every_relation_a_rival_is_reported_under():
    import json
    from pathlib import Path

    from workers.decision.registry import CHECKS, registered

    registered()  # the components are registered on first use
    schema = json.loads((Path(__file__).resolve().parent.parent / "schemas" / "verdict.schema.json").read_text())
    described = schema["properties"]["mismatches"]["items"]["properties"]["type"]["description"]
    assert [t for t in CHECKS["rival"].types if t not in described] == []


@pytest.mark.parametrize("claim,window,rival", [
    ("Barack Obama was born in Hawaii.", "Barack Obama was born in Honolulu, Hawaii.", []),  # another granularity
    ("Albert Einstein was born in Germany.", "Albert Einstein was born in Ulm, in the German Empire.", []),
    ("Albert Einstein was born in France.", "Albert Einstein was born in Ulm, in the German Empire.", ["Ulm"]),
])
def test_a_birthplace_named_at_another_granularity_is_no_rival(claim, window, rival):
    assert [s.object for s, _ in rivals(claim_relation(claim), (window,))] == rival
