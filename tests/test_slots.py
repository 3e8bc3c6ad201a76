"""Typed slots (workers/decision/slots.py): extracted, normalised and compared with the evidence's."""
from __future__ import annotations

import pytest

from workers.decision.slots import compare, extract

pytestmark = pytest.mark.unit


def one(text):
    slots = extract(text)
    assert len(slots) == 1, slots
    return slots[0]


def status(claim, *evidence):
    return [(c.slot.text, c.status, c.evidence) for c in compare(claim, tuple(evidence))]


def test_a_year_is_a_year_and_a_number_with_a_comma_is_not():
    assert (one("The bridge opened in 1937.").type, one("The bridge opened in 1937.").value) == ("year", 1937)
    n = one("It has 1,937 seats.")
    assert (n.type, n.value, n.key) == ("number", 1937.0, "seat")
    assert one("It cost 1937 dollars.").type == "year"  # a bare four-digit year-like number reads as a year


def test_a_year_close_in_characters_is_a_clash_naming_what_the_evidence_says():
    assert status("The bridge opened in 1973.", "The bridge opened to traffic in 1937.") == [("1973", "clash", "1937")]
    assert status("The bridge opened in 1837.", "The bridge opened to traffic in 1937.") == [("1837", "clash", "1937")]
    assert status("The bridge opened in 1937.", "The bridge opened to traffic in 1937.") == [("1937", "stated", "")]


def test_dates_normalise_across_orders_and_a_year_matches_its_date():
    assert one("born on 5 March 1937").value == (1937, 3, 5) == one("born March 5, 1937").value
    assert status("He was born in 1937.", "He was born on 5 March 1937.") == [("1937", "stated", "")]
    assert status("born in March 1937", "born on 5 March 1937") == [("March 1937", "stated", "")]
    assert status("born on 6 March 1937", "born on 5 March 1937")[0][1] == "clash"
    assert status("born on 5 March 1937", "He was born in 1937.")[0][1] == "unstated"  # the day is not stated


def test_ordinals_keep_what_they_rank():
    s = one("Hamburg is the second-largest city in Germany.")
    assert (s.type, s.value, s.key) == ("ordinal", 2, "largest")
    assert one("his 3rd album").value == 3
    assert status("Lyon is the second-largest city.", "Lyon is the third-largest city in France.") == \
        [("second-largest", "clash", "third-largest")]
    assert extract("At first she declined.") == ()  # "first" ranks nothing here
    assert status("the second-largest city", "its second album")[0][1] == "stated"  # the value is there


def test_percentages_units_scales_and_hedges():
    assert (one("Unemployment rose to 12%.").value, one("12 per cent").value) == (12.0, 12.0)
    assert status("About 21 percent were born abroad.", "About 12 percent were born abroad.")[0][1] == "clash"
    assert one("The tower is 324 metres tall.").key == one("a 324 m tower").key == "m"
    assert status("The tower is 342 metres tall.", "The tower is 324 metres tall.") == [("342 metres", "clash", "324 metres")]
    assert status("The tower is 324 m tall.", "The tower is 324 metres tall.")[0][1] == "stated"
    assert one("3.5 million people").value == 3_500_000 and one("Five million people").value == 5_000_000
    assert status("a population of 3.5 million people", "It has 3,512,000 people.")[0][1] == "stated"  # ± half the last digit
    assert status("a population of 3.6 million people", "It has 3,512,000 people.")[0][1] == "clash"
    assert status("about 3,000 people", "3,200 people")[0][1] == "stated"  # hedged: within 10 %
    assert status("3,000 people", "3,200 people")[0][1] == "clash"


def test_words_and_decades_and_what_is_not_a_slot():
    assert one("two children").value == 2 and one("in the 1990s").type == "decade"
    assert status("He has 4 kids.", "He has four children.")[0][1] == "stated"  # the value, under another word
    assert extract("One of them said so.") == ()
    assert status("The tower is 324 metres tall.", "The tower is tall.")[0][1] == "unstated"


def test_a_clash_needs_one_unambiguous_other_value():
    assert status("Curie won it in 1905.", "She won it in 1903 and again in 1911.")[0][1] == "unstated"  # which one?
    # a value another slot of the claim states is no rival: only the claim's own date is there
    assert [s for _, s, _ in status("On 22 December 2017 the deadline was moved to 21 June 2018.",
                                    "December 22, 2017: deadline moved")] == ["stated", "unstated"]


def test_bounds_state_any_value_on_their_side():
    assert status("His opus list ran to over 400.", "His opus list ended at 443.")[0][1] == "stated"
    assert status("His opus list ran to over 400.", "His opus list ended at 343.")[0][1] == "clash"
    assert status("Less than 40% voted.", "Only 35 % voted.")[0][1] == "stated"
    assert extract("from .5 to 2")[0].value == 0.5


def test_a_numeral_inside_a_name_is_no_count():
    # "12C" is an isotope, "A320" an aircraft: neither states "12 isotopes" nor clashes with a count
    assert [s.text for s in extract("Three isotopes occur naturally, 12C and 13C being stable; the A320 flies.")] \
        == ["Three isotopes"]
    assert [(s.value, s.key) for s in extract("a 5km walk, 10kg of rice")] == [(5.0, ""), (10.0, "")]
    (c,) = compare("Twelve isotopes occur.", ("Three isotopes occur naturally, 12C and 13C being stable.",))
    assert (c.status, c.evidence) == ("clash", "Three isotopes")


def test_a_value_the_evidence_binds_to_another_word_is_a_clash():
    # the value is stated, but of something else: the word the claim binds it to carries another
    curie = "Marie Curie won the Nobel Prize in Physics in 1903 and the Nobel Prize in Chemistry in 1911."
    assert status("Marie Curie won the Nobel Prize in Chemistry in 1903.", curie) == [("1903", "clash", "1911")]
    assert status("Marie Curie won the Nobel Prize in Chemistry in 1911.", curie) == [("1911", "stated", "")]
    assert status("He died in 1950.", "He was born in 1950 and died in 1990.") == [("1950", "clash", "1990")]
    # several other values: the one bound to the claim's word decides
    assert status("He ruled until his death in 1361.", "He ruled from 1315 or 1316 until his death in 1341.") \
        == [("1361", "clash", "1341")]
    assert status("In 1968 the country became a republic.", "In 1966, the country became a republic, and he ruled "
                  "until his defeat in 1994.") == [("1968", "clash", "1966")]
    assert status("The Niger is the 15th-longest river in the world.",
                  "The Niger is the 14th-longest river in the world, and the third-longest river in Africa.") \
        == [("15th-longest", "clash", "14th-longest")]
    # no preposition binds it: a parse would tell what it belongs to, a word list does not
    assert extract("The 1962 Ferrari 250 GTO is the most expensive car.")[0].anchor == ""
    assert status("The 1962 Ferrari 250 GTO is the most expensive car.",
                  "In May 2012, a 1962 Ferrari 250 GTO sold; another sold in 2018.")[0][1] == "stated"
    assert status("Quinn had five children with his wife.", "The couple had five children. Quinn also had two "
                  "children with Friedel Dunbar.") == [("five children", "stated", "")]
