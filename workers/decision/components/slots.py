"""Typed slots (slots.py): a year, date, number, ordinal or percentage the windows state otherwise
or not at all. Regular expressions only, so it is asked first; a clash on topic refutes."""
from __future__ import annotations

from schemas.verdict import Mismatch

from ..registry import DecisionCheck, Effect, Relabel, register
from ..slots import SlotCheck, compare


@register
class SlotsCheck(DecisionCheck):
    name = "slot"
    runs = "every decided claim, on the titled windows (regular expressions, microseconds)"
    types = ("year", "date", "decade", "percent", "ordinal", "number")
    effect = Effect.REFUTES
    switch = "slots"
    order = 10

    def find(self, checks) -> tuple[SlotCheck, ...]:
        return compare(checks.claim, checks.titled)

    def agrees(self, checks) -> bool:
        return all(s.status == "stated" for s in checks.slots)

    def mismatches(self, checks) -> list[Mismatch]:
        return [Mismatch(self.name, s.slot.type, s.slot.text, s.status, s.evidence or None)
                for s in checks.slots if s.status != "stated"]

    def describe(self, mismatch: Mismatch) -> str:
        said = f' (it says "{mismatch.evidence}")' if mismatch.evidence else ""
        return f'the claim\'s {mismatch.type} "{mismatch.span}"{said}'

    def relabel(self, checks, topical: bool) -> Relabel | None:
        """The window entails the rest of the claim and states this slot otherwise, on the claim's
        topic: contradiction evidence."""
        clash = checks.clash
        if clash is None or not topical:
            return None
        return Relabel(Effect.REFUTES, f"The evidence states the claim's {clash.slot.type} \"{clash.slot.text}\" as "
                                       f"\"{clash.evidence}\"; the rest of the claim it supports.", "slot_clash")
