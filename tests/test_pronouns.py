"""R4 possessive pronouns with the real spaCy parse: independent possessives keep their 's."""
import pytest

from workers.surfaces.pronouns import find_pronoun, resolve

pytestmark = pytest.mark.model


def test_hers_is_possessive():
    rewrite, _ = resolve("The red car is hers.", ["Mary Jones bought a red car last week."])
    assert find_pronoun("The red car is hers.").possessive
    assert rewrite == "The red car is Mary Jones's."


def test_theirs_is_possessive():
    site = find_pronoun("The big house on the hill is theirs.")
    assert site is not None and site.text == "theirs" and site.possessive
    rewrite, _ = resolve("The big house on the hill is theirs.", ["The Beatles lived in Liverpool."])
    assert rewrite.endswith("Beatles'."), rewrite  # possessive of a plural: apostrophe, never bare "Beatles."


def test_object_her_is_not_possessive():
    site = find_pronoun("I met her in Paris.")
    assert site is not None and not site.possessive


# R4 once wrote "Aaron Presley's" for Elvis: the small spaCy model tags only "Aaron Presley" as the
# PERSON in "Elvis Aaron Presley was ..." (a sentence-initial first name is left out of the entity).
_ELVIS_FULL = ["Elvis Aaron Presley was a famous musician and singer known as the \"King of Rock and Roll.\"",
               "I've heard of him. What else do you know about him?"]
_ELVIS_BOTH = ["Do you like Elvis?", "Yes! Elvis Aaron Presley was an American singer and actor.",
               "Elvis Presley is known as the King of Rock and Roll."]


def _middle_name_rewrites(rewrites):
    return [r for r in rewrites if "Aaron Presley" in r and "Elvis Aaron Presley" not in r]


def test_subject_pronoun_gets_the_full_name_not_middle_and_last():
    rewrite, rewrites = resolve("He was born in Tupelo, Mississippi.", _ELVIS_FULL)
    assert rewrite == "Elvis Aaron Presley was born in Tupelo, Mississippi."
    assert not _middle_name_rewrites(rewrites), rewrites


def test_possessive_pronoun_gets_the_full_name_not_middle_and_last():
    rewrite, rewrites = resolve("His first record was made at Sun Records.", _ELVIS_FULL)
    assert rewrite == "Elvis Aaron Presley's first record was made at Sun Records."
    assert not _middle_name_rewrites(rewrites), rewrites


def test_full_and_short_name_both_mentioned_no_candidate_is_middle_and_last():
    """Every candidate the gate may pick is a name in use: the full name or first + last."""
    for claim in ("He was born in Tupelo, Mississippi.", "His first record was made at Sun Records."):
        rewrite, rewrites = resolve(claim, _ELVIS_BOTH)
        assert rewrite.startswith("Elvis Presley"), rewrite
        assert not _middle_name_rewrites(rewrites), rewrites
        assert any(r.startswith("Elvis Aaron Presley") for r in rewrites), rewrites


def test_name_after_born_keeps_its_first_name():
    """DialFact testsmall 'His first name is definetly better ...': the context's 'He was born
    Elvis Aaron Presley!' gave 'Aaron Presley's first name'."""
    ctx = ["Hello", "Hi, do you enjoy Elvis Presley", "yes, I do. I am familiar with his big hits",
           "He was born Elvis Aaron Presley!  I actually really like his whole name."]
    _, rewrites = resolve("His first name is better for someone who is named the King.", ctx)
    assert rewrites and not _middle_name_rewrites(rewrites), rewrites


def test_title_or_role_before_a_name_is_not_a_given_name():
    """The given-name rule above must not take a title or role into the name (d2315bf wrote
    "President Barack Obama was ..."): R4 uses the name, which the evidence is likely to repeat."""
    for ctx, name in ((["President Barack Obama was born in Hawaii."], "Barack Obama"),
                      (["Coach Bill Belichick won six Super Bowls with the Patriots."], "Bill Belichick"),
                      (["Dr. Martin Luther King Jr. gave a famous speech in 1963."], "Martin Luther King Jr.")):
        rewrite, rewrites = resolve("He was very famous.", ctx)
        assert rewrite == f"{name} was very famous.", (rewrite, rewrites)
    rewrite, _ = resolve("He was born in Tupelo.", ["Elvis Aaron Presley was a famous singer."])
    assert rewrite == "Elvis Aaron Presley was born in Tupelo."  # a given name still joins
