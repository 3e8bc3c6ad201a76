"""Check-worthiness on the real spaCy parse: questions, greetings, thanks and chit-chat are skipped
(with their kind, for the verdict's rationale); factual statements are not, including facts framed
as questions and turns that mix a question or a greeting with a fact."""
import pytest

from workers.checkworthy import KINDS, REASON, check_worthiness
from schemas.protocols import turn_verdicts

pytestmark = pytest.mark.model


@pytest.mark.parametrize("turn", ["I love cheerleading!", "That's cool, I didn't know that",
                                  "Do you have a favorite game?", "Yeah, me too."])
def test_chit_chat_is_not_checkworthy(turn):
    w = check_worthiness(turn)
    assert not w.checkworthy and w.reason == REASON and w.kind in KINDS


@pytest.mark.parametrize("turn,kind", [
    ("Did you visit Graceland when you were in Memphis?", "question"),  # names places, still a question
    ("Do you know who Elvis Presley is?", "question"),
    ("Do you know Elvis Presley?", "question"),
    ("do you like rpgs", "question"),  # chat drops the '?'
    ("Hi there!", "greeting"),
    ("Hello, how are you?", "greeting"),
    ("Good morning! Nice to meet you.", "greeting"),
    ("Bye!", "greeting"),
    ("Thank you so much.", "thanks"),
    ("Thanks!", "thanks"),
    ("Thanks for the help!", "thanks"),
    ("Thanks a lot, that is interesting.", "thanks"),
    ("Thank you so much. I'm curious, can you tell me the names of some of these players?", "question"),
    ("Hi there! Do you know of players who have come out while playing sports?", "question"),
    ("I love cheerleading!", "personal"),
])
def test_questions_greetings_thanks_are_skipped_with_their_kind(turn, kind):
    w = check_worthiness(turn)
    assert (w.checkworthy, w.reason, w.kind) == (False, REASON, kind)


@pytest.mark.parametrize("turn", ["Elvis Presley was born in Tupelo, Mississippi.",
                                  "I read that the Eiffel Tower is 330 metres tall.",
                                  "Did you know that Harry Potter was first published in 1997?",
                                  "Did you know Elvis was born in 1935?",
                                  "Did you know that plants are mainly unicellular eukaryotes?",  # no entity at all
                                  "Have you heard that the Beatles sold over 600 million records?",
                                  "Elvis was born in Tupelo, wasn't he?",  # a tag question states its clause
                                  "Bow hunting is the practice of aiming a bow and arrow, do you use a bow?",
                                  "Did you visit Graceland? Elvis was born in Tupelo, Mississippi.",
                                  "Elvis was born in Tupelo. Did you visit Graceland when you were in Memphis?",
                                  "Hi! The Eiffel Tower is 330 metres tall.",
                                  "Thanks, Elvis was born in 1935.",
                                  "Thanks for telling me that Elvis was born in 1935.",
                                  "Hello Kitty is a Japanese character.",  # a greeting word is not a greeting
                                  "The teams compete in basketball.",  # short, but a noun subject asserts
                                  "It's a young adult novel.",
                                  "I love it, and the Beatles sold over 600 million records.",
                                  # a question that carries a statement about something else
                                  "Can you believe the city near Niagara Falls was made up of fossils?",
                                  "Did you see the film that won the Oscar in 1994?",
                                  "Its roots are in West Virginia??"])
def test_factual_statements_are_checkworthy(turn):
    w = check_worthiness(turn)
    assert w.checkworthy and w.kind == ""


def test_empty_turn_is_not_checkworthy():
    w = check_worthiness("  \n")
    assert (w.checkworthy, w.kind) == (False, "empty") and check_worthiness("") == w


def test_skipped_turn_verdict_says_why(settings, nli, encoder):
    """The stream's contract stays one verdict per checked turn: a skipped question is NOT ENOUGH
    INFO, read no evidence, and its rationale names the rule and the kind."""
    from schemas import parse_verdict
    from schemas.items import CheckItem
    from workers.pipeline import Pipeline

    pipe = Pipeline(settings.updated(claims={"checkworthy": True}), nli, encoder, None, protocol="fv", surface="r0")
    elvis = [("Elvis Presley", "Elvis Aaron Presley was born in Tupelo, Mississippi, and moved to Memphis.")]
    q, hi, fact = turn_verdicts(pipe.check_turns([
        CheckItem("q", "1", [], "Did you visit Graceland when you were in Memphis?", elvis),
        CheckItem("q", "2", [], "Hello, how are you?", elvis),
        CheckItem("q", "3", ["Hi there!"], "Did you know Elvis was born in Tupelo, Mississippi?", elvis)]))
    assert (q.label, q.rationale["rule"], q.rationale["kind"]) == ("NOT ENOUGH INFO", "not-check-worthy", "question")
    assert hi.rationale["kind"] == "greeting" and not q.evidence and "verify" not in q.timings_ms
    assert fact.rationale["rule"] != "not-check-worthy" and "kind" not in fact.rationale
    assert fact.label == "SUPPORTS"
    again = parse_verdict(q.to_json())  # the published form validates and keeps the kind
    assert again.rationale["kind"] == "question"


def test_default_skips_only_questions_greetings_and_thanks(settings, nli, encoder):
    """Shipped default (`claims.skip_turns`): questions, greetings and thanks go unchecked; a personal
    opinion is still checked unless `claims.checkworthy` skips every kind of turn without a fact."""
    from schemas.items import CheckItem
    from workers.pipeline import Pipeline

    assert settings.claims.skip_turns == "question,greeting,thanks" and not settings.claims.checkworthy
    turns = ["Did you visit Graceland when you were in Memphis?", "Thanks so much!", "I love cheerleading!"]
    items = [CheckItem("d", str(i), [], t, [("Elvis Presley", "Elvis Presley was born in Tupelo.")])
             for i, t in enumerate(turns)]
    default = turn_verdicts(Pipeline(settings, nli, encoder, None, protocol="fv", surface="r0").check_turns(items))
    assert [v.rationale.get("kind") for v in default] == ["question", "thanks", None]
    assert "verify" in default[2].timings_ms  # the opinion was checked
    everything = turn_verdicts(Pipeline(settings.updated(claims={"checkworthy": True}), nli, encoder, None, protocol="fv",
                          surface="r0").check_turns(items))
    assert [v.rationale.get("kind") for v in everything] == ["question", "thanks", "personal"]
    none = turn_verdicts(Pipeline(settings.updated(claims={"skip_turns": ""}), nli, encoder, None, protocol="fv",
                    surface="r0").check_turns(items))
    assert all("verify" in v.timings_ms for v in none)


def test_a_turn_is_skipped_only_when_every_sentence_is_of_a_skipped_kind():
    skip = frozenset({"question", "greeting", "thanks"})
    assert check_worthiness("Thanks! Do you like it?").skipped_by(skip)
    assert not check_worthiness("Thanks! I love cheerleading.").skipped_by(skip)  # an opinion: checked by default
    assert check_worthiness("Thanks! I love cheerleading.").skipped_by(None)


def test_batched_parsing_gives_the_same_kinds_and_fills_the_parse_cache(dialfact_records):
    """CheckWorthyStage with `perf.batch_parsing` parses the batch's turns in one spaCy pass into
    the parse cache: every turn's kinds must equal one `nlp()` call each, and the surfaces then
    find the turns parsed."""
    from types import SimpleNamespace

    from workers.stages import CheckWorthyStage
    from workers.surfaces import pronouns

    turns = [r.response for r in dialfact_records[:60]] + ["Hello, how are you?", "Thanks so much!", "  "]
    expected = [check_worthiness(t).kinds for t in turns]
    pronouns.set_parse_cache(0)
    pronouns.set_parse_cache(4096)
    try:
        states = [SimpleNamespace(item=SimpleNamespace(claim=t), skip_reason=None, notes={}) for t in turns]
        CheckWorthyStage(frozenset({"question", "greeting", "thanks"}), batch_parse=True).run(states)
        assert all((t,) in pronouns._cached_parse.cache for t in turns if t.strip())
        hits = pronouns._cached_parse.counts.hits
        assert [check_worthiness(t, pronouns.parse).kinds for t in turns] == expected
        assert pronouns._cached_parse.counts.hits - hits == sum(1 for t in turns if t.strip())
        assert [s.notes.get("kind") for s in states[-3:]] == ["greeting", "thanks", None]
    finally:
        pronouns.set_parse_cache(0)
