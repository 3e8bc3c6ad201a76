"""The structured checks of a decided claim against the windows its label rests on: typed slots
(slots.py), its relations (structure.py) and its subject (`subject_named`).

Why: a SUPPORTS badge must mean the fact, not the words. The NLI model entails a claim
whose words the evidence covers whatever their roles, and a year close in characters. These checks
need no model and are precision-first: each fails only on what it can see (a value stated otherwise
or not at all, two words of the claim present in one evidence sentence but related otherwise, a
named subject the windows do not name). The display never shows a SUPPORTS they do not all agree with (`agreed`);
the guarded rule turns a supported claim whose slot an on-topic window states otherwise into
REFUTES (guarded.py), and the verdict names every mismatch (schema 2.3 `mismatches`).

The parse behind the structural check is the one cost that matters (a window's spaCy parse, ~5 ms):
it runs lazily, on the first question that needs it — with `relation_clash` (shipped) the decision
asks it of every SUPPORTS (+2.7 ms CPU a claim on the yardstick's FV claims, docs/stress.md), without
it the display only of a SUPPORTS it would otherwise show; the verdict reports it once asked."""
from __future__ import annotations

from functools import lru_cache

from schemas.verdict import Mismatch

from .slots import SlotCheck, compare
from .sufficiency import _window_terms, subject_terms
from .structure import StructureCheck, check as structure_check


class Checks:
    """The checks of one claim against the windows its label rests on (texts as the decision read them)."""

    def __init__(self, claim: str, texts: tuple[str, ...], titled: tuple[str, ...], subject: bool | None):
        self.claim, self.texts, self.titled, self.subject = claim, texts, titled, subject
        self.slots: tuple[SlotCheck, ...] = compare(claim, titled)  # cheap: regular expressions
        self._structure: StructureCheck | None = None

    @property
    def structure(self) -> StructureCheck:
        """The structural check (parsed on first use)."""
        if self._structure is None:
            self._structure = structure_check(self.claim, self.texts)
        return self._structure

    @property
    def structure_ran(self) -> bool:
        return self._structure is not None

    @property
    def clash(self) -> SlotCheck | None:
        """The first slot the windows state with another value."""
        return next((s for s in self.slots if s.status == "clash"), None)

    @property
    def slots_agree(self) -> bool:
        return all(s.status == "stated" for s in self.slots)

    @property
    def agreed(self) -> bool:
        """Every check agrees: each slot stated, the subject named, the relations held (parsed here if
        not yet). The cheap ones first, so the parse runs only when they pass."""
        return self.slots_agree and self.subject is not False and self.structure.agreed

    def unstated(self) -> str:
        """What the claim states that the windows do not, as the rationale's note says it (the first
        check that disagreed; asked after `agreed` is False)."""
        for m in self.mismatches():
            if m.check == "slot":
                said = f' (it says "{m.evidence}")' if m.evidence else ""
                return f'the claim\'s {m.type} "{m.span}"{said}'
            if m.check == "subject":
                return "the claim's subject"
            said = f" (it has {m.evidence})" if m.evidence else ""
            return f"the claim's relation {m.span}{said}"
        return "all the claim states"

    def mismatches(self) -> list[Mismatch]:
        """What did not agree, for the verdict (the structural check only where it ran)."""
        out = [Mismatch("slot", s.slot.type, s.slot.text, s.status, s.evidence or None)
               for s in self.slots if s.status != "stated"]
        if self.subject is False:
            out.append(Mismatch("subject", "subject", self.claim, "differs", None))
        if self._structure is not None and self._structure.failed is not None:
            f = self._structure.failed
            out.append(Mismatch("structure", f.role, f.text(), "differs", self._structure.evidence or None))
        return out


def window_text(ev, i: int, sep: str = " ") -> str:
    """Window i with its passage title: what coverage and the slots read (a title names the subject;
    the slots read it as a sentence of its own, `sep` ". ", so a value at the window's start is not
    bound to the title's last word)."""
    k = int(ev.passage_index[i])
    title = ev.titles[k] if 0 <= k < len(ev.titles) else ""
    text = ev.window_texts[i] if i < len(ev.window_texts) else ""
    return f"{title}{sep}{text}" if title else text


def checks_of(ev, windows: tuple[int, ...]) -> Checks | None:
    """The checks of claim `ev` (pronouns resolved: its topic) against these windows; None when the
    caller gave probabilities only (no window texts)."""
    if len(ev.window_texts) != ev.n or not windows:
        return None
    claim = ev.topic or ev.claim
    texts = tuple(ev.window_texts[i] for i in windows)
    titled = tuple(window_text(ev, i, ". ") for i in windows)
    return Checks(claim, texts, titled, subject_named(claim, titled))


def subject_named(claim: str, texts: tuple[str, ...]) -> bool | None:
    """Do the texts name the claim's subject? Asked only of a subject with a name or number in it
    ("Kyoto", "The 1998 final"): a pronoun or a common noun ("it", "the club") is not checkable
    here (None); the subject is named when one of its names is there (a window often names a
    person by a part of their name)."""
    terms = subject_terms(claim)
    if not terms:
        return None
    # a name: an anchor, or a proper noun at the start of the sentence (key_terms counts those as words)
    proper = _proper_terms(claim)
    anchors = {t for kind, t in terms if kind == "anchor" or t in proper}
    if not anchors:
        return None
    present = set()
    for t in texts:
        words, nums = _window_terms(t)
        present |= words | nums
    return bool(anchors & present)


@lru_cache(maxsize=65536)
def _proper_terms(claim: str) -> frozenset:
    """The normalised words of the claim's proper nouns, once per claim: the parse cache is off
    unless settings turn it on, and a claim's checks are built for every decision of it."""
    from ..surfaces.pronouns import parse
    from ..windows import normalise

    return frozenset(x for tok in parse(claim) if tok.pos_ == "PROPN" for x in normalise(tok.lower_))
