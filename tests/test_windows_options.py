"""Verifier-input options measured on DialFact: spaCy's sentencizer keeps initials inside a name,
Snowball stems without the suffix stripper's artefacts, stop words are filtered after stemming."""
import pytest

from workers.windows import normalise, prescore, split_sentences

pytestmark = pytest.mark.model


def test_spacy_splitter_keeps_initials():
    text = "Richard J. Daley was mayor of Chicago. He was born in Bridgeport."
    assert split_sentences(text, "spacy") == ["Richard J. Daley was mayor of Chicago.", "He was born in Bridgeport."]
    assert split_sentences(text, "regex")[0] == "Richard J."  # the known defect of the default


def test_snowball_stemmer():
    assert normalise("species this running", "snowball") == ["speci", "this", "run"]
    assert normalise("species this", "suffix") == ["specy", "thi"]


def test_stop_words_filtered_after_stemming():
    # "this" stems to "thi" under the suffix stripper and must still count as a stop word
    assert prescore("this", "this band", "suffix") == prescore("", "this band", "suffix") == 0.0
