"""Check-worthiness on the real spaCy parse: chit-chat is skipped, factual statements are not."""
import pytest

from workers.checkworthy import REASON, check_worthiness


@pytest.mark.parametrize("turn", ["I love cheerleading!", "That's cool, I didn't know that",
                                  "Do you have a favorite game?", "Yeah, me too."])
def test_chit_chat_is_not_checkworthy(turn):
    w = check_worthiness(turn)
    assert not w.checkworthy and w.reason == REASON


@pytest.mark.parametrize("turn", ["Elvis Presley was born in Tupelo, Mississippi.",
                                  "I read that the Eiffel Tower is 330 metres tall.",
                                  "Did you know that Harry Potter was first published in 1997?",
                                  "I love it, and the Beatles sold over 600 million records."])
def test_factual_statements_are_checkworthy(turn):
    assert check_worthiness(turn).checkworthy
