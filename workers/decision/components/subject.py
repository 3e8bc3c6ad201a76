"""The claim's named subject: do the windows name it? A window about something else that happens to
entail the claim's words is no evidence for it ("The Moon is made of cheese." from a cheese-making
passage): the display's veto, and with "subject" in `checks_on` the SUPPORTS is withdrawn (label,
not only display; measured in docs/stress.md before it ships)."""
from __future__ import annotations

from functools import lru_cache

from schemas.verdict import Mismatch

from ..registry import DecisionCheck, Effect, Relabel, register
from ..sufficiency import subject_terms, window_terms


@register
class SubjectCheck(DecisionCheck):
    name = "subject"
    runs = "every decided claim with a name or number in its subject (word sets, microseconds)"
    types = ("subject",)
    effect = Effect.WITHDRAW
    order = 20

    def find(self, checks) -> bool | None:
        """Named in a deciding window, its passage's title, or a name its passage's opening gives its subject."""
        return subject_named(checks.claim, checks.titled + tuple(a for a in checks.aliases if a))

    def agrees(self, checks) -> bool:
        return checks.subject is not False

    def mismatches(self, checks) -> list[Mismatch]:
        return [Mismatch(self.name, "subject", checks.claim, "differs", None)] if checks.subject is False else []

    def describe(self, mismatch: Mismatch) -> str:
        return "the claim's subject"

    def relabel(self, checks, topical: bool) -> Relabel | None:
        """Withdrawn only where the windows' passages say what they are about (a title): a window of an
        untitled passage (a grounded turn's, a citation's) may name its subject in the passage's
        other sentences, so there the display's veto alone acts."""
        if checks.subject is not False or not any(t.strip() for t in checks.titles):
            return None
        return Relabel(Effect.WITHDRAW, "No window the label rests on names the claim's subject.", "subject_unnamed")


def subject_named(claim: str, texts: tuple[str, ...]) -> bool | None:
    """Do the texts name the claim's subject? Asked only of a subject with a name or number in it
    ("Kyoto", "The 1998 final"): a pronoun or a common noun ("it", "the club") is not checkable
    here (None). The subject is named by its head name, the last of its names ("Einstein",
    "Leviticus" for "the Book of Leviticus", "Bush" for a misspelt "Geroge H.W. Bush"), or by its
    names but one of three or more ("New York" for "New York City"; a middle name is not asked:
    sufficiency.middle_names): a first name alone is not enough, "Albert Camus" does not name
    "Albert Einstein". A window's passage title and the other names the passage's opening gives
    count (the texts the caller passes)."""
    terms = subject_terms(claim)
    if not terms:
        return None
    # a name: an anchor, or a proper noun at the start of the sentence (key_terms counts those as words)
    proper = proper_terms(claim)
    anchors = {t for kind, t in terms if kind == "anchor" or t in proper}
    if not anchors:
        return None
    present = set()
    for t in texts:
        words, nums = window_terms(t)
        present |= words | nums
    from ...windows import normalise

    head = next((t for t in reversed(normalise(claim)) if t in anchors), None)
    return head in present or len(anchors & present) >= (len(anchors) - 1 if len(anchors) >= 3 else len(anchors))


@lru_cache(maxsize=65536)
def proper_terms(claim: str) -> frozenset:
    """The normalised words of the claim's proper nouns, once per claim: the parse cache is off
    unless settings turn it on, and a claim's checks are built for every decision of it."""
    from ...surfaces.pronouns import parse
    from ...windows import normalise

    return frozenset(x for tok in parse(claim) if tok.pos_ == "PROPN" for x in normalise(tok.lower_))
