"""The claim's relations (structure.py): its words are in the windows but related otherwise. A
spaCy parse of each window (~5 ms), so it is asked last and only when needed; a clash by the
precise test withdraws a SUPPORTS (`relation_clash`), the broad test vetoes the badge."""
from __future__ import annotations

from schemas.verdict import Mismatch

from ..registry import DecisionCheck, Effect, Relabel, register
from ..structure import StructureCheck, check


@register
class RelationsCheck(DecisionCheck):
    name = "structure"
    runs = "on the first question that needs it: a SUPPORTS with `relation_clash`, else a badge to show (a parse)"
    types = ("agent", "patient", "theme", "attached", "of", "prep", "be")
    effect = Effect.WITHDRAW
    switch = "relation_clash"
    order = 30

    def find(self, checks) -> StructureCheck:
        return check(checks.claim, checks.texts)

    def agrees(self, checks) -> bool:
        return checks.structure.agreed

    def mismatches(self, checks) -> list[Mismatch]:
        found = checks.found(self.name)  # reported only where it ran: asking here would parse
        if found is None or found.failed is None:
            return []
        return [Mismatch(self.name, found.failed.role, found.failed.text(), "differs", found.evidence or None)]

    def describe(self, mismatch: Mismatch) -> str:
        said = f" (it has {mismatch.evidence})" if mismatch.evidence else ""
        return f"the claim's relation {mismatch.span}{said}"

    def relabel(self, checks, topical: bool) -> Relabel | None:
        """The window's words cover the claim, but it gives one of the claim's relations to another
        word (the precise test; the display's veto reads the broad one, which it implies)."""
        precise = checks.structure.precise
        if precise is None:
            return None
        return Relabel(Effect.WITHDRAW, f"The evidence relates the claim's words otherwise: {precise.evidence}, "
                                        f"not {precise.failed.text()}.", "relation_clash")
