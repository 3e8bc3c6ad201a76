"""Typed slots: the numbers, years, dates, ordinals and percentages a claim states, normalised and
compared with the evidence's deterministically.

Why not leave them to the NLI model: a wrong year close in characters can score entailment 0.94
("1837" against "1937", docs/verifier-recipes.md §8), and a value the evidence does not state at all
is not evidence for it. A comparison of normalised values is exact, costs microseconds and names
the span for the verdict (`mismatches`).

Each slot has a type (year, date, decade, percent, ordinal, number), a normalised value and a key
that says which slot of the sentence it fills: the unit or the counted noun of a number ("3 km",
"4 children"), the word an ordinal ranks ("second-largest" → largest, "3rd album" → album). A claim
slot is then

- stated: the evidence states the same value in a slot of that type (and key);
- clash: the evidence states that slot with one other value ("1937" for "1973"), and no value of
  it another slot of the claim states;
- unstated: neither.

A stated value is still a clash when the evidence binds it to something else: the word a
preposition binds the claim's value to ("the Nobel Prize in Chemistry in 1903") carries another
value there ("... in Physics in 1903 and ... in Chemistry in 1911"), the same for the words an
ordinal ranks ("the 15th-longest river in the world"); that binding also picks the rival among
several other values.

Values compare exactly, except a hedged number ("about 3,000") or one written with a scale word
("3.5 million"), which matches within its hedge (10 %) or its last digit, and a bound ("over 400",
"less than 40 %"), which any value on its side states.
Hand-written on purpose: what is needed is small (the measured cases are years, dates, ordinals and
round quantities), and the libraries that parse quantities (quantulum3) load a classifier to do it."""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache

_MONTH_NAMES = "january february march april may june july august september october november december".split()
MONTHS = {**{m: i + 1 for i, m in enumerate(_MONTH_NAMES)}, **{m[:3]: i + 1 for i, m in enumerate(_MONTH_NAMES)},
          "sept": 9}
_MONTH = r"(?:january|february|march|april|may|june|july|august|september|october|november|december|" \
         r"jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)\.?"
NUMBER_WORDS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve "
                                           "thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split())}
NUMBER_WORDS.update({w: 10 * (i + 2) for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split())})
SCALES = {"hundred": 100, "thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000,
          "trillion": 1_000_000_000_000, "k": 1_000, "bn": 1_000_000_000}  # not "m": metres
ORDINAL_WORDS = {w: i + 1 for i, w in enumerate("first second third fourth fifth sixth seventh eighth ninth tenth "
                                               "eleventh twelfth thirteenth fourteenth fifteenth sixteenth "
                                               "seventeenth eighteenth nineteenth twentieth".split())}
# units written several ways → one name (a number's key); a unit not here keys by the word as written
UNITS = {"km": "km", "kms": "km", "kilometre": "km", "kilometres": "km", "kilometer": "km", "kilometers": "km",
         "m": "m", "metre": "m", "metres": "m", "meter": "m", "meters": "m", "cm": "cm", "mm": "mm",
         "mi": "mile", "mile": "mile", "miles": "mile", "ft": "foot", "foot": "foot", "feet": "foot",
         "kg": "kg", "kilogram": "kg", "kilograms": "kg", "g": "g", "gram": "g", "grams": "g", "lb": "pound",
         "lbs": "pound", "pound": "pound", "pounds": "pound", "t": "tonne", "tonne": "tonne", "tonnes": "tonne",
         "ton": "tonne", "tons": "tonne", "km2": "km2", "sq": "square", "square": "square",
         "hectare": "hectare", "hectares": "hectare", "acre": "acre", "acres": "acre",
         "year": "year", "years": "year", "yr": "year", "month": "month", "months": "month",
         "day": "day", "days": "day", "hour": "hour", "hours": "hour", "minute": "minute", "minutes": "minute",
         "century": "century", "centuries": "century", "people": "person", "persons": "person",
         "person": "person", "inhabitants": "person", "residents": "person",
         "$": "usd", "usd": "usd", "dollar": "usd", "dollars": "usd", "€": "eur", "eur": "eur", "euro": "eur",
         "euros": "eur", "£": "gbp", "gbp": "gbp"}
HEDGES = frozenset("about around approximately roughly nearly almost some circa ca c. estimated".split())  # ± 10 %
AT_LEAST = ("over", "more than", "at least", "above", "exceeding", "upwards of")  # the value is a lower bound
AT_MOST = ("under", "less than", "fewer than", "below", "up to", "at most")  # an upper bound
_KEY_SKIP = frozenset("of the a an and or in on at to for from by with as is was were are be".split())

_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|(?<![\d.])\.\d+"
_SCALE = r"(?:\s*(?:hundred|thousand|million|billion|trillion|bn|k)\b)?"
_WORDNUM = "|".join(sorted(NUMBER_WORDS, key=len, reverse=True))
_ORDWORD = "|".join(sorted(ORDINAL_WORDS, key=len, reverse=True))
PATTERNS = (  # (type, regex): tried in this order; a span taken is not read again
    ("date", re.compile(rf"\b(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<m>{_MONTH}),?\s+(?P<y>\d{{3,4}})\b", re.I)),
    ("date", re.compile(rf"\b(?P<m>{_MONTH})\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<y>\d{{3,4}})\b", re.I)),
    ("date", re.compile(rf"\b(?P<m>{_MONTH}),?\s+(?P<y>1\d{{3}}|20\d{{2}})\b", re.I)),
    ("date", re.compile(rf"\b(?P<m>{_MONTH})\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\b", re.I)),
    ("date", re.compile(rf"\b(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<m>{_MONTH})\b", re.I)),
    ("date", re.compile(r"\b(?P<y>1\d{3}|20\d{2})-(?P<m>0[1-9]|1[0-2])-(?P<d>[0-3]\d)\b")),
    ("percent", re.compile(rf"(?P<n>{_NUM})\s*(?:%|per\s?cent\b)", re.I)),
    ("decade", re.compile(r"\b(?P<y>1\d{2}0|20\d0)'?s\b", re.I)),
    ("decade", re.compile(r"(?<![\d,.])'?(?P<y>[1-9]0)'?s\b", re.I)),  # "the '40s", "late 40s": the century unsaid
    ("ordinal", re.compile(rf"\b(?P<n>\d+)(?:st|nd|rd|th)\b(?:[\s-]+(?P<k>[a-z]+))?", re.I)),
    ("ordinal", re.compile(rf"\b(?P<w>{_ORDWORD})(?P<h>-)?(?:(?(h)|\s+)(?P<k>[a-z]+))?", re.I)),
    ("year", re.compile(r"(?<![\d,.$£€])\b(?P<y>1\d{3}|20\d{2})\b(?![,.]?\d|\s*(?:%|per\s?cent))")),
    ("number", re.compile(rf"(?P<cur>[$£€])?(?P<n>{_NUM}){_SCALE}(?:\s+(?P<k>[a-z$€£]+\d?))?", re.I)),
    ("number", re.compile(rf"\b(?P<w>{_WORDNUM}){_SCALE}(?:\s+(?P<k>[a-z]+))?\b", re.I)),
)
# an ordinal word counts as a slot only where it ranks something ("the second-largest", "his third
# album"), not "at first", "first of all"
_ORD_BEFORE = re.compile(r"(?:\bthe|\ba|\bhis|\bher|\bits|\btheir|\bour|\bmy|'s|’s)\s*$", re.I)


@dataclass(frozen=True)
class Slot:
    """One typed value of a text: `value` normalised (a date: (year, month, day), None where unstated)."""
    type: str  # year | date | decade | percent | ordinal | number
    value: object
    key: str  # the unit, the counted noun or the ranked word ("" for none)
    text: str  # as written
    tolerance: float = 0.0  # a number's accepted difference (hedged or scaled)
    bound: str = ""  # "min": "over 400" (any value from 400 states it), "max": "under 400"; "": the value itself
    anchor: str = ""  # the word it is bound to (`_anchor`: "Chemistry in 1911" → chemistry); "" for none


@dataclass(frozen=True)
class SlotCheck:
    """A claim slot against the evidence: stated, clash (the evidence states that slot otherwise) or unstated."""
    slot: Slot
    status: str  # stated | clash | unstated
    evidence: str = ""  # what the evidence states there (the clashing values, as written)


def _number(text: str) -> float | None:
    """"3,500" → 3500, "3.5 million" → 3.5e6, "two thousand" → 2000; None for no number."""
    parts = text.lower().replace(",", "").split()
    if not parts:
        return None
    head = parts[0]
    try:
        value = float(head)
    except ValueError:
        if head not in NUMBER_WORDS:
            return None
        value = float(NUMBER_WORDS[head])
    for p in parts[1:]:
        value *= SCALES.get(p, 1)
    return value


def _key(word: str | None) -> str:
    if not word:
        return ""
    w = word.lower()
    if w in UNITS:
        return UNITS[w]
    if w in _KEY_SKIP or w in SCALES or w in MONTHS:
        return ""
    return w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w


def _hedged(text: str, start: int) -> bool:
    before = text[max(0, start - 20):start].lower().split()
    return bool(before) and before[-1] in HEDGES


def _bound(text: str, start: int) -> str:
    before = " ".join(text[max(0, start - 24):start].lower().split())
    return "min" if before.endswith(AT_LEAST) else "max" if before.endswith(AT_MOST) else ""


@lru_cache(maxsize=65536)
def extract(text: str) -> tuple[Slot, ...]:
    """The typed slots of a text, in the order the patterns find them."""
    taken: list[tuple[int, int]] = []
    out: list[tuple[int, Slot]] = []
    for kind, rx in PATTERNS:
        for m in rx.finditer(text):
            s, e = m.span()
            if any(s < b and a < e for a, b in taken):
                continue
            slot = _slot(kind, m, text)
            if slot is None:
                continue
            if kind in ("number", "ordinal") and slot.key:  # the key word is not part of the span taken
                e = m.start("k") if m.group("k") and m.start("k") >= 0 else e
            taken.append((s, e))
            out.append((s, replace(slot, anchor=_anchor(text, s, e if kind == "ordinal" else m.end(), kind == "ordinal"))))
    return tuple(slot for _, slot in sorted(out, key=lambda x: x[0]))


BINDERS = frozenset("in on at since until till by from to during of for after before through".split())
_TOKENS = re.compile(r"[\w'’.-]+|[,;:()]")


def _anchor(text: str, start: int, end: int, ordinal: bool = False) -> str:
    """The word a slot is bound to by a preposition: "the Nobel Prize in Chemistry in 1911" →
    chemistry, "until his death in 1341" → death, "died on 5 May" → died; at a sentence start, the
    first content word after the slot's phrase ("In 1966, the country" → >country). "" for none: a
    value that is not a preposition's object ("The 1962 Ferrari", "had five children") is bound to
    what a parse would tell, not a word list. An ordinal is bound to the words after it ("the
    third-longest river in Africa" → ~river africa)."""
    from spacy.lang.en.stop_words import STOP_WORDS  # a word list, no model loaded

    if ordinal:  # "the 14th-longest river in the world": what it ranks, and where
        words = _content_after(text, end, 6, STOP_WORDS)
        return "~" + " ".join(words[:3]) if words else ""
    near = re.split(r"[.!?]\s+(?=[A-Z0-9])", text[max(0, start - 60):start])[-1]  # this sentence only
    before = _TOKENS.findall(near)
    if before and before[-1].lower() in ("the", "a", "an"):
        before = before[:-1]
    if not before or before[-1].lower() not in BINDERS:
        return ""
    if len(before) >= 2 and before[-2][0].isalpha():
        w = before[-2].lower().strip(".")
        return "" if w in STOP_WORDS or w in MONTHS else _key(w)
    if len(before) == 1:  # "In 1966, the country became": the subject
        words = _content_after(text, end, 5, STOP_WORDS, past_comma=True)
        return ">" + words[0] if words else ""
    return ""


def _content_after(text: str, end: int, tokens: int, stop_words, past_comma: bool = False) -> list[str]:
    """The content words (keyed) among the first `tokens` after `end`, up to the first punctuation
    (`past_comma`: a comma right after is not one)."""
    words = []
    for i, word in enumerate(_TOKENS.findall(text[end:end + 60])[:tokens]):
        if not word[0].isalnum():
            if past_comma and i == 0 and word == ",":
                continue
            break
        w = word.lower().strip(".")
        if w not in stop_words and w.isalpha():
            words.append(_key(w))
    return words


def _slot(kind: str, m: re.Match, text: str) -> Slot | None:
    g = m.groupdict()
    written = m.group(0).strip()
    if kind == "date":
        month = g.get("m")
        month = MONTHS.get(month.lower().rstrip(".")) if month and not month.isdigit() else (int(month) if month else None)
        day = int(g["d"]) if g.get("d") else None
        year = int(g["y"]) if g.get("y") else None
        if day is not None and not 1 <= day <= 31:
            return None
        if g.get("m", "").lower() == "may" and year is None:
            return None  # "May 5" is a date, but "may 5" in "they may 5 times..." is rare; keep only with a year
        return Slot("date", (year, month, day), "", written)
    if kind == "year":
        return Slot("year", int(g["y"]), "", written)
    if kind == "decade":
        return Slot("decade", int(g["y"]), "", written)
    if kind == "percent":
        v = float(g["n"].replace(",", ""))
        return Slot("percent", v, "", written, _tol(v, g["n"], _hedged(text, m.start())), _bound(text, m.start()))
    if kind == "ordinal":
        if g.get("w"):
            if not g.get("h") and not _ORD_BEFORE.search(text[:m.start()]):
                return None
            value = ORDINAL_WORDS[g["w"].lower()]
        else:
            value = int(g["n"])
        key = _key(g.get("k"))
        written = text[m.start():m.end("k")] if g.get("k") else written
        return Slot("ordinal", value, key, written)
    # number
    if g.get("n") and _glued(text, m.start("n"), m.end("n")):
        return None
    raw = g.get("n") or g.get("w")
    scaled = written
    key_word = g.get("k")
    if key_word and key_word.lower() in SCALES:
        key_word = None
    if g.get("k"):
        scaled = text[m.start():m.start("k")].strip()
    if g.get("cur"):
        scaled = scaled[1:]
    value = _number(scaled)
    if value is None:
        return None
    if g.get("w") and value < 2:
        return None  # "one", "zero": a pronoun, a determiner or a figure of speech ("one reason", "one of")
    key = UNITS.get(g["cur"], "") if g.get("cur") else _key(key_word)
    has_scale = any(w.lower() in SCALES for w in scaled.split()[1:])
    tol = _tol(value, raw, _hedged(text, m.start()), has_scale)
    shown = text[m.start():m.end("k")] if g.get("k") and key else scaled if not g.get("cur") else written
    return Slot("number", value, key, shown.strip(), tol, _bound(text, m.start()))


def _tol(value: float, written: str, hedged: bool, scaled: bool = False) -> float:
    """How far another value may be and still state this one: 10 % when hedged; half the last digit
    written when scaled ("3.5 million": ± 50,000); else exact."""
    if hedged:
        return abs(value) * 0.10
    if scaled:
        digits = written.replace(",", "")
        head = _number(digits)  # "3.5", or a word: "five"
        step = 10 ** -len(digits.split(".")[1]) if "." in digits else 1
        return abs(value) / head * step / 2 if head else 0.0
    return 0.0


def _years(slot: Slot) -> int | None:
    return slot.value if slot.type == "year" else slot.value[0] if slot.type == "date" else None


def _in_decade(decade: int, year: int | None, both_decades: bool) -> bool | None:
    """Is `year` in the claim's decade ("1960s": 1963; "1800s": the century, as it is often meant;
    "40s": any 1940s-like year)? None when the evidence gives no year."""
    if year is None:
        return None
    if both_decades:
        return year == decade or (decade < 100 and year % 100 == decade)
    if decade < 100:
        return year % 100 // 10 * 10 == decade
    span = 100 if decade % 100 == 0 else 10
    return decade <= year < decade + span


def _same(c: Slot, e: Slot) -> bool | None:
    """Does evidence slot `e` state claim slot `c` (True), state that slot otherwise (False), or
    say nothing of it (None)?"""
    if c.type == "decade" and e.type in ("year", "date", "decade"):
        return _in_decade(c.value, _years(e) if e.type != "decade" else e.value, e.type == "decade")
    if c.type in ("year", "date") and e.type in ("year", "date"):
        cy, ey = _years(c), _years(e)
        if c.type == "year":
            return None if ey is None else cy == ey
        cv, ev = c.value, (e.value if e.type == "date" else (ey, None, None))
        shared = [(a, b) for a, b in zip(cv, ev) if a is not None and b is not None]
        if not shared:
            return None
        if any(a != b for a, b in shared):
            return False
        return True if all(b is not None for a, b in zip(cv, ev) if a is not None) else None
    if c.type != e.type:
        return None
    if c.type == "ordinal":
        if c.key and e.key and c.key != e.key:
            return None
        return c.value == e.value
    if c.type == "number" and c.key != e.key:  # only a number of the same unit or counted noun is the same slot
        return None
    return _close(c, e, 0.05 if c.type == "percent" else 1e-9 * abs(c.value))


def _close(c: Slot, e: Slot, eps: float) -> bool:
    """Does value e state claim value c ("over 400": 443 does; "about 3,000": 3,200 does)?"""
    if c.bound == "min" and e.value >= c.value:
        return True
    if c.bound == "max" and e.value <= c.value:
        return True
    return abs(c.value - e.value) <= max(c.tolerance, e.tolerance, eps)


def _glued(text: str, start: int, end: int) -> bool:
    """A numeral inside a name ("12C", "A320", "F1"): letters right against it that are not a unit
    ("5km", "10kg") or a scale ("3bn") make it part of a word, not a count."""
    if start > 0 and text[start - 1].isalpha():
        return True
    run = re.match(r"[A-Za-z]+", text[end:])
    return bool(run) and run.group().lower() not in UNITS and run.group().lower() not in SCALES \
        and run.group().lower() not in ("bn", "b", "k", "m")


def _value_stated(c: Slot, e: Slot) -> bool:
    """The same value of the same type under another key ("4 marriages" / "married four times",
    "740 nanometers" / "740 nanometres"): stated, for the SUPPORTS side; which word it attaches to
    is the structural check's question (structure.py), not a clash."""
    if c.type != e.type or c.type not in ("number", "ordinal"):
        return False
    return _close(c, e, 1e-9 * abs(c.value))


def _states(c: Slot, e: Slot) -> bool:
    return _same(c, e) is True or _value_stated(c, e)


def _norm(e: Slot) -> object:
    """The value an evidence slot states, whatever its type ("1937" and "5 March 1937" state one year)."""
    return _years(e) if e.type in ("year", "date") and (e.type == "year" or e.value[1:] == (None, None)) else e.value


def compare(claim: str, evidence: tuple[str, ...]) -> tuple[SlotCheck, ...]:
    """Each typed slot of the claim against the evidence texts together. A clash needs one other
    value, unambiguous: evidence that states several values of that slot (a page of dates, "1903
    ... 1911") says which goes where no better than the claim, so its slot is unstated — unless one
    of them is bound to the word the claim binds its value to ("death in 1341" for "death in 1361");
    and a value another slot of the claim states ("On 22 December 2017 ... to 21 June 2018") is not a
    rival. A value the evidence states of something else is a clash too (`_bound_elsewhere`)."""
    claimed = extract(claim)
    ev_slots = [s for t in evidence for s in extract(t)]
    free = [e for e in ev_slots if not any(_states(c, e) for c in claimed)]
    out = []
    for c in claimed:
        if any(_states(c, e) for e in ev_slots):
            bound = _bound_elsewhere(c, claimed, ev_slots)
            out.append(SlotCheck(c, "clash", bound) if bound else SlotCheck(c, "stated"))
            continue
        rivals = [e for e in free if _same(c, e) is False]
        if len({repr(_norm(e)) for e in rivals}) > 1 and c.anchor:  # several: the one bound to the claim's word
            rivals = [e for e in rivals if e.anchor == c.anchor]
        if len({repr(_norm(e)) for e in rivals}) == 1:
            out.append(SlotCheck(c, "clash", ", ".join(dict.fromkeys(e.text for e in rivals))))
        else:
            out.append(SlotCheck(c, "unstated"))
    return tuple(out)


def _bound_elsewhere(c: Slot, claimed: tuple[Slot, ...], ev_slots: list[Slot]) -> str:
    """A value the evidence states, but of something else: the word the claim binds it to carries
    another value there ("Nobel Prize in Physics in 1903 and ... in Chemistry in 1911" for "in
    Chemistry in 1903"). Returns that value as written, "" when none: no word, the word carries the
    claim's value somewhere too, or the other value is one the claim states elsewhere."""
    if not c.anchor:
        return ""
    there = [e for e in ev_slots if e.anchor == c.anchor]
    if any(_states(c, e) for e in there):
        return ""
    rivals = [e for e in there if _same(c, e) is False and not any(_states(o, e) for o in claimed)]
    return ", ".join(dict.fromkeys(e.text for e in rivals))
