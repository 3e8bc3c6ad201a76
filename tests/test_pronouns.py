"""R4 possessive pronouns with the real spaCy parse: independent possessives keep their 's."""
from workers.surfaces.pronouns import find_pronoun, resolve


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
