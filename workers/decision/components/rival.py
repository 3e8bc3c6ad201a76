"""The rival (relations.py): for a claim with an exclusive functional relation ("X is the capital of
Y", "W was written by A"), do the claim's windows state the relation with another filler at its
functional end ("Ankara is the capital of Turkey" for "Istanbul is the capital of Turkey")?

Why: retrieval finds the claim's subject's passage and the verifier reads the same words in other
roles as entailment; a knowledge base stating another filler of a one-filler slot contradicts the
claim. Regular expressions over every window the claim read (not only the deciding ones: the
rival is often in another passage, one the rival query brought: workers/rival.py), asked only of a
claim with such a relation. A rival in a window about one of the relation's parties (its title
names a filler, it is on the claim's topic, or its passage has no title: one given for the reply)
is firm: with "rival" in `checks_on` the guarded rule answers REFUTES with that window shown,
whatever the label was (guarded.py `rivalled`); a rival elsewhere only hides the badge."""
from __future__ import annotations

from schemas.verdict import Mismatch

from ..registry import DecisionCheck, Effect, Relabel, register
from ..relations import RELATIONS, Statement, claim_relation, filler_key, rivals, same_filler, with_owner


@register
class RivalCheck(DecisionCheck):
    name = "rival"
    runs = "a decided claim with an exclusive functional relation, over all its windows (regular expressions)"
    types = tuple(r.name for r in RELATIONS if r.exclusive and not r.quantity)
    effect = Effect.REFUTES
    order = 40

    def find(self, checks) -> list[tuple[Statement, bool, int]]:
        """(the rival statement, whether its window is about the relation's parties, the window's
        index) for each rival in the claim's windows; [] for a claim without an exclusive relation."""
        claim = claim_relation(checks.claim)
        if claim is None:
            return []
        return [(rival, window.on_topic or _about_a_party(window.title, claim, rival), i)
                for i, window in enumerate(checks.pool)
                for rival, _ in rivals(claim, (with_owner(window.text, window.title),))]

    def firm(self, checks) -> tuple[Statement, int] | None:
        """The first rival in a window about the relation's parties, with that window's index."""
        return next(((s, i) for s, sure, i in checks.finding(self.name) if sure), None)

    def agrees(self, checks) -> bool:
        """Any rival hides the badge, once the check is switched on (`checks_on`)."""
        return self.name not in checks.enabled or not checks.finding(self.name)

    def mismatches(self, checks) -> list[Mismatch]:
        if self.name not in checks.enabled:
            return []
        return [Mismatch(self.name, s.relation.name, checks.claim, "clash", _stated(s))
                for s, *_ in checks.finding(self.name)[:1]]

    def describe(self, mismatch: Mismatch) -> str:
        return f"the claim's {mismatch.type} (it states {mismatch.evidence})"

    def relabel(self, checks, topical: bool) -> Relabel | None:
        """A firm rival among the windows the SUPPORTS rests on (the guarded rule has looked at every
        window first, `rivalled`: this is the same finding where a caller builds `Checks` itself)."""
        firm = self.firm(checks)
        return None if firm is None else Relabel(Effect.REFUTES, note(firm[0]), "rival")


def note(s: Statement) -> str:
    """The rationale's sentence for a refutation by a rival."""
    return f"The evidence states another filler of the claim's relation: {_stated(s)}."


def _stated(s: Statement) -> str:
    return f"{s.subject} — {s.relation.name.replace('_', ' ')} — {s.object}"


def _about_a_party(title: str, claim: Statement, rival: Statement) -> bool:
    """Is the rival's passage about the relation: untitled (a passage the app gave for this reply,
    or a citation: chosen as its evidence), or its title names a filler of the claim or the rival?
    A titled passage about something else may state the relation in passing."""
    return not title.strip() or _names_a_party(title, claim) or _names_a_party(title, rival)


def _names_a_party(title: str, statement: Statement) -> bool:
    """Is the window's passage about one of the relation's fillers (its title names one)?"""
    title = title.strip().lower()
    return bool(title) and any(same_filler(filler_key(title), statement.key(end)) for end in ("subject", "object"))
