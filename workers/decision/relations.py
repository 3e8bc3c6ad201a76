"""Functional relations as data: which slot of a claim has one filler, and how a sentence states it.

Why: for a functional slot — one capital of a country, one birthplace of a person, one author of a
book — evidence that states another filler contradicts the claim ("Ankara is the capital of
Turkey" against "Istanbul is the capital of Turkey"), while a relation with many fillers ("Lyon is a
city in France", "Paris is in Europe") never does. Question-based checkers (Q², QAGS) ask the same
question of the knowledge base: what fills this slot?

Each relation says how a sentence states it (regular expressions with `subject` and `object`
groups, matched in claims and evidence alike) and which end is functional: `one_subject` (a
country has one capital: another subject is a rival), `one_object` (a person has one birthplace:
another object is a rival), or neither (never a rival). Quantities (population, height, length,
area) and years are parsed too, but their values are the slot check's (slots.py: units, hedges,
rounding), so `Relation.quantity` marks them and the rival check leaves them to it."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache

# a filler: a name or phrase of up to eight words, not running over a clause boundary
_FILLER = r"(?:the\s+)?[A-Z0-9][\w'.\-]*(?:\s+(?:of|de|da|van|von|the|and|[A-Z0-9][\w'.\-]*)){0,7}"
_YEAR = r"(?:in\s+)?(?:\d{3,4})"
_NUMBER = r"(?:about\s+|around\s+|over\s+)?[\d.,]+(?:\s+(?:million|billion|thousand))?(?:\s+[a-z]+\d?)?"


class End(StrEnum):
    """Which end of a relation has one filler (the other end's rival is the claim's contradiction)."""
    SUBJECT = "one_subject"  # one subject per object: the capital (subject) of a country (object)
    OBJECT = "one_object"  # one object per subject: a person's birthplace, a book's (subject) author (object)
    NEITHER = "neither"  # many fillers either way: a city in a country, a member of a group


@dataclass(frozen=True)
class Relation:
    """A relation, how it is stated, and which end is functional."""
    name: str  # the subject is what the relation is said of: the city of capital_of, the work of author_of
    patterns: tuple[str, ...] = field(repr=False)  # regular expressions with named groups `subject` and `object`
    functional: End
    quantity: bool = False  # a year or amount: compared by the slot check, not read as a rival
    changes: bool = False  # a state that changes over time (a capital moves): a past and a present filler are no rivals
    places: bool = False  # its varied end is a place, named at any granularity (Honolulu, Hawaii, the United States)

    @property
    def exclusive(self) -> bool:
        return self.functional is not End.NEITHER

    @property
    def compiled(self) -> tuple[re.Pattern, ...]:
        return _compile(self.patterns)


def _p(template: str, value: str = _FILLER, subject: str = _FILLER) -> str:
    """A pattern from a template: S and O stand for the subject and object fillers (an object of
    the given shape); a comma may close an apposition before the verb ("Tokyo, officially ..., is")."""
    template = template.replace(r"S\s+", r"S,?\s+")
    return template.replace("S", rf"(?P<subject>{subject})").replace("O", rf"(?P<object>{value})")


# a thing discovered or invented is often a common noun ("penicillin", "the telephone"): the subject of
# those relations may be one, as it is the fixed end a rival must repeat word for word
_THING = rf"(?:{_FILLER}|(?:[Tt]he\s+)?[a-z][\w\-]*(?:\s+(?!(?:in|on|at|by|of|from|for|with|and|to|as)\b)[a-z][\w\-]*)?)"


def _q(template: str, value: str) -> str:
    """A quantity's pattern: the object a number, a year or a date."""
    return _p(template, value)


_IS = r"(?:is|was|has been|became)"
# words that describe a person before the name ("English author", "the Scottish economist")
_DESCRIBED = r"(?:[A-Z][a-z]+\s+(?=[a-z]))?(?:[a-z][\w-]*\s+){0,2}"
# a capital of the whole: "the cultural / legislative / historic capital" names one of several, no rival
_CAPITAL_KIND = r"(?:(?:state|federal|official|national|provincial|regional)\s+)?"
RELATIONS: tuple[Relation, ...] = (
    Relation("capital_of", (_p(rf"S,?\s+{_IS}\s+(?:also\s+)?the\s+{_CAPITAL_KIND}capital(?:\s+city)?(?:\s+and\s+(?:\w+[\s-]+)?\w+\s+city\s+(?:of|in)|\s+of)\s+O"),
                            _p(r"[Tt]he\s+capital\s+of\s+O\s+(?:is|was)\s+S"),
                            _p(r"O's\s+capital(?:\s+city)?\s+(?:is|was)\s+S"),
                            _p(rf"S,?\s+{_IS}\s+O's\s+{_CAPITAL_KIND}capital")), End.SUBJECT, changes=True),
    Relation("born_in", (_p(r"S\s+was\s+born\s+in\s+O"),), End.OBJECT, places=True),
    Relation("born_on", (_q(r"S\s+was\s+born\s+on\s+O", r"[\w ,]+\d{4}"),), End.OBJECT, quantity=True),
    Relation("died_in", (_p(r"S\s+died\s+in\s+O"),), End.OBJECT, places=True),
    Relation("located_in", (_p(rf"S\s+{_IS}\s+(?:located|situated)?\s*in\s+O"), _p(r"S\s+lies\s+in\s+O")), End.NEITHER),
    Relation("city_in", (_p(rf"S\s+{_IS}\s+an?\s+(?:\w+\s+)?(?:city|town|country|region|state|river)\s+in\s+O"),), End.NEITHER),
    Relation("member_of", (_p(rf"S\s+{_IS}\s+an?\s+(?:\w+\s+)?member\s+of\s+O"),), End.NEITHER),
    Relation("founded_in", (_q(rf"S\s+(?:{_IS}|were)\s+founded\s+in\s+O", r"\d{2,4}"),), End.OBJECT, quantity=True),
    Relation("completed_in", (_q(rf"S\s+(?:{_IS}|were)\s+(?:completed|finished)\s+in\s+O", r"\d{2,4}"),), End.OBJECT,
             quantity=True),
    Relation("built_in", (_q(rf"S\s+(?:{_IS}|were)\s+(?:built|constructed)\s+in\s+O", r"\d{2,4}"),), End.OBJECT,
             quantity=True),
    Relation("author_of", (_p(r"O\s+(?:wrote|authored)\s+S"), _p(rf"S\s+{_IS}\s+(?:a\s+\w+\s+)?written\s+by\s+O"),
                           _p(rf"S\s+{_IS}\s+an?\s+(?:\w+\s+)?(?:novel|play|poem|book|treatise)\s+by\s+(?:the\s+)?{_DESCRIBED}O")),
             End.OBJECT),
    Relation("director_of", (_p(r"O\s+directed\s+S"), _p(rf"S\s+{_IS}\s+directed\s+by\s+O")), End.OBJECT),
    Relation("composer_of", (_p(r"O\s+composed\s+S"), _p(rf"S\s+{_IS}\s+composed\s+by\s+O")), End.OBJECT),
    Relation("discoverer_of", (_p(r"O\s+discovered\s+S", subject=_THING),
                               _p(rf"S\s+(?:{_IS}|were)\s+(?:first\s+)?discovered\s+by\s+O", subject=_THING)), End.OBJECT),
    Relation("inventor_of", (_p(r"O\s+invented\s+S", subject=_THING),
                             _p(rf"S\s+(?:{_IS}|were)\s+invented\s+by\s+O", subject=_THING)), End.OBJECT),
    Relation("founder_of", (_p(r"O\s+founded\s+S"), _p(rf"S\s+{_IS}\s+founded\s+by\s+O")), End.NEITHER),
    Relation("population_of", (_q(r"[Tt]he\s+population\s+of\s+S\s+(?:is|was)\s+O", _NUMBER),
                               _q(r"S\s+has\s+a\s+population\s+of\s+O", _NUMBER)), End.OBJECT, quantity=True),
    Relation("height_of", (_q(r"S\s+is\s+O\s+(?:tall|high)", _NUMBER),
                           _q(r"[Tt]he\s+height\s+of\s+S\s+is\s+O", _NUMBER)), End.OBJECT, quantity=True),
    Relation("length_of", (_q(r"S\s+is\s+O\s+long", _NUMBER), _q(r"[Tt]he\s+length\s+of\s+S\s+is\s+O", _NUMBER)),
             End.OBJECT, quantity=True),
    Relation("area_of", (_q(r"S\s+(?:has|covers)\s+an\s+area\s+of\s+O", _NUMBER),
                         _q(r"[Tt]he\s+area\s+of\s+S\s+is\s+O", _NUMBER)), End.OBJECT, quantity=True),
)
BY_NAME = {r.name: r for r in RELATIONS}


@dataclass(frozen=True)
class Statement:
    """One relation a text states: `relation(subject, object)`, the fillers as written."""
    relation: Relation
    subject: str
    object: str
    span: str = field(default="", compare=False)  # the words that state it (its tense is read from them)

    def key(self, end: str) -> str:
        """A filler compared: lowercase, a leading "the" and trailing punctuation dropped."""
        return filler_key(getattr(self, end))


def filler_key(filler: str) -> str:
    return re.sub(r"^the\s+", "", filler.strip(" .,;:").lower())


@lru_cache(maxsize=None)
def _compile(patterns: tuple[str, ...]) -> tuple[re.Pattern, ...]:
    return tuple(re.compile(p) for p in patterns)


@lru_cache(maxsize=65536)
def statements(text: str) -> tuple[Statement, ...]:
    """Every relation the text states, each filler trimmed to the name (a clause after a comma or
    a relative pronoun is not part of it)."""
    found: list[Statement] = []
    for relation in RELATIONS:
        for pattern in relation.compiled:
            for m in pattern.finditer(text):
                obj = m.group("object").strip(" .") if relation.quantity else _trim(_SENTENCE.split(m.group("object"))[0])
                found.append(Statement(relation, _trim(_SENTENCE.split(m.group("subject"))[-1]), obj, m.group(0)))
    return tuple(found)


def claim_relation(claim: str) -> Statement | None:
    """The claim's functional relation, if it states one whole (its first; a claim that only
    mentions one in a clause is not read)."""
    return next(iter(statements(claim.strip())), None)


_SENTENCE = re.compile(r"(?<=[a-z])\.\s+")  # a sentence's end inside a filler ("History. Bonn"; not "J. R. R.")


def _trim(filler: str) -> str:
    return re.split(r"\s+(?:which|who|that|where|with|in|on|from|since)\s+|,", filler.strip(" ."), maxsplit=1)[0]


def rivals(claim: Statement, texts: tuple[str, ...]) -> list[tuple[Statement, str]]:
    """The statements in these texts of the claim's relation with another filler at its functional
    end (the same filler at the other end), with the text stating each. Empty for a relation that is
    not exclusive or a quantity (the slot check's)."""
    rel = claim.relation
    if not rel.exclusive or rel.quantity:
        return []
    fixed, varied = ("object", "subject") if rel.functional is End.SUBJECT else ("subject", "object")
    out = []
    for text in texts:
        for s in statements(text):
            # the fixed end the very same filler ("Wales" is not "New South Wales"), the varied end clearly another
            if (s.relation is rel and s.key(fixed) == claim.key(fixed) and not same_filler(s.key(varied), claim.key(varied))
                    and same_time(s, claim) and not (rel.places and names_place(text, getattr(claim, varied)))):
                out.append((s, text))
    return out


def names_place(text: str, place: str) -> bool:
    """Does the text name the place, or a word made from it ("German" for Germany, "Hawaiian")? A
    birthplace stated at another granularity is no rival: "born in Honolulu, Hawaii" for "born in
    Hawaii", "born in Ulm, in the German Empire" for "born in Germany". Where the text does not name
    the claim's place at all, another place is read as a rival (a gazetteer would know Ulm is in
    Germany; the text is what is at hand)."""
    words = {w.lower() for w in re.findall(r"[^\W\d_]+", text)}
    stems = [w.lower()[: max(4, len(w) - 2)] for w in re.findall(r"[^\W\d_]+", place) if len(w) >= 4]
    return any(w.startswith(stem) for stem in stems for w in words)


_OWNER = re.compile(r"\b(?:[Tt]he\s+(?:country|nation|state|province|region|island|kingdom|republic)'s|[Ii]ts)(?=\s+(?:\w+\s+)?capital\b)")


def with_owner(text: str, title: str) -> str:
    """The passage's own subject put where its text says "the country's" or "its" before "capital"
    ("Tokyo is the country's capital" in the passage titled Japan: "Tokyo is Japan's capital")."""
    title = title.strip()
    return _OWNER.sub(lambda m: f"{title}'s", text) if title and "capital" in text else text


def varied_end(claim: Statement) -> str:
    """The end of the claim's relation another filler of which contradicts it: the subject of a
    one-subject relation (the capital), else the object (the birthplace, the author)."""
    return "subject" if claim.relation.functional is End.SUBJECT else "object"


def masked_query(claim: Statement, text: str) -> str | None:
    """The claim with its varied end's filler taken out ("Istanbul is the capital of Turkey." →
    "is the capital of Turkey."): what the knowledge base is asked to fill. None for a relation that
    has no rival (not exclusive, or a quantity: the slot check's) or a filler not in the text."""
    if not claim.relation.exclusive or claim.relation.quantity:
        return None
    filler = getattr(claim, varied_end(claim))
    if not filler or filler not in text:
        return None
    masked = " ".join(text.replace(filler, " ", 1).split())
    return masked if len(masked.split()) >= 2 else None


_TENSE = {"is": "present", "has been": "present", "was": "past", "became": "past"}


def same_time(a: Statement, b: Statement) -> bool:
    """For a relation that changes over time, the copula's tense agrees: "Bonn was the capital of
    Germany" is no rival of "Berlin is the capital of Germany" (a past filler and a present one are
    both true). Other relations (born, written by) hold once: "was written by" is "is a play written by"."""
    if not (a.relation.changes and b.relation.changes):
        return True
    ta, tb = _tense(a.span), _tense(b.span)
    return ta is None or tb is None or ta == tb


def _tense(span: str) -> str | None:
    m = re.search(r"\b(has been|is|was|became)\b", span)
    return _TENSE[m.group(1)] if m else None


def same_filler(a: str, b: str) -> bool:
    """One filler names the other: equal, or one the other's last words ("Shakespeare" in "William
    Shakespeare", "the United Kingdom" / "United Kingdom")."""
    return a == b or a.endswith(" " + b) or b.endswith(" " + a) or a.startswith(b + " ") or b.startswith(a + " ")
