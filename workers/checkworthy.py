"""Check-worthiness (claim detection, as in Chamoun et al. and LiveFC): a turn that states no
checkable fact ("I love cheerleading!", "Did you visit Graceland?", "Hi there!", "Thanks!") is
answered NOT ENOUGH INFO with the reason "not check-worthy" and its kind, before any retrieval or NLI.

Rule over the spaCy parse, conservative on purpose (a wrongly skipped factual claim loses a
SUPPORTS or REFUTES; a wrongly checked personal turn usually still ends NOT ENOUGH INFO): a turn
is not check-worthy only when every sentence is a question, a greeting, thanks, a short reaction
without any entity, number or noun subject, or a first/second-person experience or opinion that
names no entity or number. Facts framed as questions ("Did you know that X ...?", "X was born in
Tupelo, wasn't he?", "X is ..., do you like it?"), reported facts ("I read that the cod is ...") and a greeting or thanks that
goes on to state a fact ("Thanks, Elvis was born in 1935.") stay checkable. The rule is hand-written
(nothing fitted); `dialcheck tune checkworthy` reports it on DialFact testsmall and HybriDial dev."""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

REASON = "not check-worthy"
KINDS = ("question", "greeting", "thanks", "personal", "reaction")  # a skipped turn's kind, by priority
# (a blank turn is "empty")
_FIRST_SECOND = {"i", "me", "my", "mine", "myself", "we", "us", "our", "ours", "you", "your", "yours"}
_OPINION = {"love", "like", "enjoy", "hate", "prefer", "think", "guess", "feel", "wish", "hope", "want", "believe",
            "cool", "awesome", "great", "nice", "fun", "interesting", "amazing", "wow", "favorite", "favourite",
            "fan", "agree", "glad", "sad", "sorry", "appreciate", "thank", "thanks", "suppose"}
_REPORTING = {"read", "know", "hear", "learn", "see", "find"}  # "I read that ..." introduces a fact
_FACT_ENTS = {"PERSON", "ORG", "GPE", "NORP", "WORK_OF_ART", "EVENT", "FAC", "LOC", "PRODUCT", "LANGUAGE",
              "DATE", "CARDINAL", "QUANTITY", "MONEY", "PERCENT", "ORDINAL", "LAW"}
# openers, matched at the start of a sentence (lower case); what follows them is classified on its own
_GREETING = re.compile(r"(?:oh |well )?(?:hi|hello|hey|hiya|howdy|greetings"
                       r"|good (?:morning|afternoon|evening|night|day)|(?:good)?bye|see you(?: later| soon)?|nice to (?:meet|see|talk to|chat with) you"
                       r"|how are you(?: doing)?|how's it going|how is it going|what's up)\b")
_THANKS = re.compile(r"(?:oh |well |ok(?:ay)?,? )?(?:thank you|thanks|thank u|thx|many thanks|much appreciated"
                     r"|(?:i )?(?:really )?appreciate (?:it|that|this|your help))\b")
_OPENER_FILLER = {"there", "everyone", "everybody", "all", "again", "so", "much", "very", "a", "lot", "guys",
                  "friend"}  # "thanks so much", "hi there"
_TAG_QUESTION = re.compile(r",\s*(?:(?:is|was|are|were|do|does|did|has|have|had|can|could|will|would|should)"
                           r"(?:n't| not)?\s+(?:it|he|she|they|there|that|you|we|i)|right|correct|true)\s*\?+$", re.I)
_AUX = {"do", "does", "did", "are", "is", "was", "were", "have", "has", "can", "could", "would", "will", "should"}
_SUBJ_PRON = {"you", "i", "we", "they", "he", "she", "it"}
_KNOW = {"know", "hear", "realize", "realise", "learn", "aware"}  # "did you know (that) X" states X
_THIRD = {"he", "she", "it", "they"}


@dataclass(frozen=True)
class Worthiness:
    checkworthy: bool
    reason: str = ""
    kind: str = ""  # the skipped turn's kind (KINDS), for the verdict's rationale; "" when checked
    kinds: frozenset = frozenset()  # every sentence's kind ("fact" among them when checkworthy)

    def skipped_by(self, kinds: frozenset | None) -> bool:
        """Whether a turn is left unchecked when only the turn kinds in `kinds` are skipped (None:
        every kind of turn that states no fact): all of its sentences must be of those kinds."""
        if self.checkworthy:
            return False
        return kinds is None or self.kinds <= kinds


def _nlp():
    from .surfaces.pronouns import nlp

    return nlp()


def _has_fact_entity(span) -> bool:
    return any(e.label_ in _FACT_ENTS for e in span.ents) or any(t.pos_ == "NUM" for t in span)


def _states_fact(sent) -> bool:
    """"Did you know (that) plants are ...?", "Have you heard that the Beatles ...?": a question
    about the listener's knowledge whose complement clause is a statement (not "who Elvis is")."""
    for t in sent:
        if t.lemma_.lower() in _KNOW and any(c.lower_ == "you" and c.dep_ == "nsubj" for c in t.children):
            for c in t.children:
                if c.dep_ == "ccomp" and c.i > t.i:
                    first = next(iter(c.subtree))
                    if first.tag_ not in ("WDT", "WP", "WP$", "WRB") and first.lower_ not in ("whether", "if"):
                        return True
    return bool(re.match(r"(?:did|do) you (?:know|hear|realize) that \w+ \w+|have you heard that \w+ \w+",
                         sent.text.strip().lower()))


def _embeds_statement(sent) -> bool:
    """A question that carries a statement about someone or something else: "Can you believe the
    city near Niagara Falls was made of fossils?", "Did you see the film that won the Oscar in
    1994?" - a clause (complement, relative or adverbial) with a subject that is not I/you/we and
    a name, number or noun subject, not a wh-clause ("do you know who Elvis is?")."""
    for head in sent:
        if head.dep_ not in ("ccomp", "relcl", "advcl"):
            continue
        first = next(iter(head.subtree))
        if first.tag_ in ("WP", "WP$", "WRB") or first.lower_ in ("whether", "if", "how", "why", "when"):
            continue
        subj = next((c for c in head.children if c.dep_ in ("nsubj", "nsubjpass")), None)
        if subj is None or subj.lower_ in _FIRST_SECOND:
            continue
        clause = sent.doc[first.i: head.right_edge.i + 1]
        if _has_fact_entity(clause) or subj.pos_ in ("NOUN", "PROPN") or subj.tag_ == "WDT":
            return True
    return False


def _declarative(sent) -> bool:
    """Statement word order with a noun subject, asked or not ("Its roots are in West Virginia??",
    "Brown hair has more of the dark pigment, so I wonder ...?"): checked like a statement."""
    words = [t for t in sent if not (t.is_punct or t.is_space)]
    if not words or words[0].lower_ in _AUX or words[0].tag_ in ("WDT", "WP", "WP$", "WRB"):
        return False
    root = sent.root
    subj = next((c for c in root.children if c.dep_ in ("nsubj", "nsubjpass")), None)
    return subj is not None and subj.pos_ in ("NOUN", "PROPN") and subj.i < root.i


def _is_question(sent) -> bool:
    text = sent.text.strip()
    if text.endswith("?"):
        return (not _TAG_QUESTION.search(text) and not _states_fact(sent) and not _embeds_statement(sent)
                and not _declarative(sent))
    # chat often drops the '?': an auxiliary before a pronoun subject ("do you like rpgs") asks,
    # unless the sentence names an entity or number (then it stays checked, being unsure)
    words = [t for t in sent if not (t.is_punct or t.is_space)]
    return (len(words) >= 2 and words[0].lower_ in _AUX and words[1].lower_ in _SUBJ_PRON
            and not _has_fact_entity(sent) and not _states_fact(sent))


def _short_statement(sent) -> bool:
    """A short clause that still asserts something ("The teams compete in basketball.", "It's a
    novel."): a noun subject, or a third-person pronoun subject, and no opinion word."""
    if any(t.lemma_.lower() in _OPINION or t.lower_ in _OPINION for t in sent):
        return False
    return any(t.dep_ in ("nsubj", "nsubjpass") and (t.pos_ in ("NOUN", "PROPN") or t.lower_ in _THIRD)
               for t in sent)


def _after_opener(sent, pattern):
    """The span after a greeting/thanks opener (and its fillers and punctuation), None when the
    sentence does not open with one; an empty span when the opener is all there is."""
    low = sent.text.lower()
    lead = len(low) - len(low.lstrip())
    m = pattern.match(low, lead)
    if m is None:
        return None
    end = sent.start_char + m.end()
    i = next((t.i for t in sent if t.idx >= end), sent.end)
    while i < sent.end and (sent.doc[i].is_punct or sent.doc[i].is_space or sent.doc[i].lower_ in _OPENER_FILLER):
        i += 1
    return sent.doc[i: sent.end]


def sentence_kind(sent) -> str:
    """'question' | 'greeting' | 'thanks' | 'reaction' | 'personal' | 'fact' for one spaCy sentence (or span)."""
    for kind, pattern in (("greeting", _GREETING), ("thanks", _THANKS)):
        rest = _after_opener(sent, pattern)
        if rest is None:
            continue
        # "Hello, how are you?" is a greeting; "Thanks, Elvis was born in 1935." states a fact, and
        # so does "Thanks for telling me Elvis was born in 1935" (not "thanks for the help")
        if len(rest) == 0 or sentence_kind(rest) != "fact":
            return kind
        return kind if rest[0].lower_ == "for" and not _has_fact_entity(rest) else "fact"
    if _is_question(sent):
        # "Bow hunting is the practice of ..., do you use a bow?": a statement comma-spliced before
        # the question is checked like a sentence of its own
        for t in sent:
            nxt = t.nbor() if t.i + 1 < sent.end else None
            if t.text in (",", ";") and nxt is not None and (nxt.lower_ in _AUX or nxt.tag_ in ("WDT", "WP", "WRB")):
                if sentence_kind(sent.doc[sent.start: t.i]) == "fact":
                    return "fact"
        return "question"
    has_ent = _has_fact_entity(sent)
    reported = any(t.lemma_.lower() in _REPORTING and any(c.dep_ == "ccomp" and c.i > t.i for c in t.children)
                   and not any(c.dep_ == "neg" for c in t.children) for t in sent)
    subj = {t.lower_ for t in sent if t.dep_ in ("nsubj", "nsubjpass")}
    opinion = any(t.lemma_.lower() in _OPINION or t.lower_ in _OPINION for t in sent)
    if not reported and not has_ent and subj & _FIRST_SECOND and opinion:
        return "personal"
    if not has_ent and sum(t.is_alpha for t in sent) < 6 and not _short_statement(sent):
        return "reaction"
    return "fact"


def check_worthiness(turn: str, parse=None) -> Worthiness:
    """`parse`: text → spaCy Doc of the same model (the surfaces' cached `parse`, filled a batch at a
    time by `parse_ahead`); one `nlp()` call by default."""
    if not turn.strip():
        return Worthiness(False, REASON, "empty", frozenset({"empty"}))
    doc = (parse or _nlp())(turn)
    kinds = frozenset(sentence_kind(s) for s in doc.sents)
    if "fact" in kinds:
        return Worthiness(True, kinds=kinds)
    return Worthiness(False, REASON, next(k for k in KINDS if k in kinds), kinds)


# ---- a small learned alternative, compared by cross-validation (`dialcheck tune checkworthy`) ----
FEATURES = ("frac_question", "frac_reaction", "frac_personal", "frac_fact", "frac_greeting_thanks", "ents", "propn",
            "num", "first_second", "opinion", "log_tokens", "sentences")


def features(turn: str) -> np.ndarray:
    doc = _nlp()(turn)
    sents = list(doc.sents) or [doc[:]]
    kinds = [sentence_kind(s) for s in sents]
    toks = [t for t in doc if t.is_alpha]
    return np.array([kinds.count("question") / len(kinds), kinds.count("reaction") / len(kinds),
                     kinds.count("personal") / len(kinds), kinds.count("fact") / len(kinds),
                     (kinds.count("greeting") + kinds.count("thanks")) / len(kinds),
                     sum(e.label_ in _FACT_ENTS for e in doc.ents), sum(t.pos_ == "PROPN" for t in doc),
                     sum(t.pos_ == "NUM" for t in doc), sum(t.lower_ in _FIRST_SECOND for t in toks) / max(len(toks), 1),
                     sum(t.lemma_.lower() in _OPINION for t in toks), np.log1p(len(toks)), len(sents)], dtype=float)
