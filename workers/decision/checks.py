"""The structured checks of a decided claim against the windows its label rests on: the checks
registered in registry.py (components/: typed slots, the claim's subject, its relations), asked
through one `Checks` per claim and window set.

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

from dataclasses import dataclass

from schemas.verdict import Mismatch

from .registry import DecisionCheck, Effect, Relabel, check, registered, switched_on
from .slots import SlotCheck
from .structure import StructureCheck
from .sufficiency import ON_TOPIC

@dataclass(frozen=True)
class PoolWindow:
    """One of all the windows the claim read (a check that looks beyond the deciding ones: the rival)."""
    text: str  # with its passage title, as the slots read it
    title: str
    on_topic: bool  # the on-topic guard does not doubt it


class Checks:
    """The registered checks (registry.py) of one claim against the windows its label rests on
    (texts as the decision read them; `titled`: each with its passage title, as the slots read them;
    `pool`: every window the claim read; `enabled`: the checks switched on by name, `checks_on`;
    `aliases`: per window, the other names its passage gives its subject, aliases.py; `titles`: per
    window, its passage's title, "" when it has none).
    Each check's finding is worked out on first use and kept."""

    def __init__(self, claim: str, texts: tuple[str, ...], titled: tuple[str, ...],
                 pool: tuple[PoolWindow, ...] = (), enabled: frozenset[str] = frozenset(),
                 aliases: tuple[str, ...] = (), titles: tuple[str, ...] = ()):
        self.claim, self.texts, self.titled, self.pool, self.enabled = claim, texts, titled, pool, enabled
        self.aliases, self.titles = aliases, titles
        self._found: dict[str, object] = {}

    def finding(self, name: str) -> object:
        """The named check's finding (worked out now if not yet)."""
        if name not in self._found:
            self._found[name] = check(name).find(self)
        return self._found[name]

    def found(self, name: str) -> object | None:
        """The named check's finding if it ran, else None (asking would run it)."""
        return self._found.get(name)

    @property
    def slots(self) -> tuple[SlotCheck, ...]:
        return self.finding("slot")

    @property
    def subject(self) -> bool | None:
        """Do the windows name the claim's subject (None: not a named subject, not asked)?"""
        return self.finding("subject")

    @property
    def structure(self) -> StructureCheck:
        """The structural check (parsed on first use)."""
        return self.finding("structure")

    @property
    def structure_ran(self) -> bool:
        return "structure" in self._found

    @property
    def clash(self) -> SlotCheck | None:
        """The first slot the windows state with another value."""
        return next((s for s in self.slots if s.status == "clash"), None)

    @property
    def agreed(self) -> bool:
        """Every check agrees, asked in the registry's order (the cheap ones first, so the parse runs
        only when they pass)."""
        return all(c.agrees(self) for c in registered() if c.vetoes_badge)

    def disagreeing(self) -> list[tuple[DecisionCheck, Mismatch]]:
        """Each mismatch with the check that found it (a check that has not run reports nothing)."""
        return [(c, m) for c in registered() for m in c.mismatches(self)]

    def unstated(self) -> str:
        """What the claim states that the windows do not, as the rationale's note says it (the first
        check that disagreed; asked after `agreed` is False)."""
        first = next(iter(self.disagreeing()), None)
        return first[0].describe(first[1]) if first is not None else "all the claim states"

    def mismatches(self) -> list[Mismatch]:
        """What did not agree, for the verdict (the structural check only where it ran)."""
        return [m for _, m in self.disagreeing()]

    def relabel(self, params, topical: bool, checked: bool) -> Relabel | None:
        """The label change the checks ask of a SUPPORTS under these guarded parameters: a refutation
        first (the evidence states it otherwise), then with `checked` any disagreement withdraws it,
        then a check's own withdrawal (the registry's order within each)."""
        switched = [c for c in registered() if switched_on(c, params)]
        for effect in (Effect.REFUTES, Effect.WITHDRAW):
            if effect is Effect.WITHDRAW and checked and not self.agreed:
                return Relabel(Effect.WITHDRAW, f"The evidence does not state {self.unstated()}.", "checks_disagree")
            for c in (c for c in switched if c.effect is effect):
                found = c.relabel(self, topical)
                if found is not None:
                    return found
        return None


def window_text(ev, i: int, sep: str = " ") -> str:
    """Window i with its passage title: what coverage and the slots read (a title names the subject;
    the slots read it as a sentence of its own, `sep` ". ", so a value at the window's start is not
    bound to the title's last word)."""
    title = _title(ev, i)
    text = ev.window_texts[i] if i < len(ev.window_texts) else ""
    return f"{title}{sep}{text}" if title else text


def checks_of(ev, windows: tuple[int, ...], enabled: tuple[str, ...] = (), on_topic: float = ON_TOPIC) -> Checks | None:
    """The checks of claim `ev` (pronouns resolved: its topic) against these windows; None when the
    caller gave probabilities only (no window texts). `enabled`: the checks switched on by name."""
    if len(ev.window_texts) != ev.n or not windows:
        return None
    claim = ev.topic or ev.claim
    texts = tuple(ev.window_texts[i] for i in windows)
    titled = tuple(window_text(ev, i, ". ") for i in windows)
    pool = tuple(PoolWindow(window_text(ev, i, ". "), _title(ev, i), bool(ev.on_topic[i] >= on_topic))
                 for i in range(ev.n)) if enabled else ()
    return Checks(claim, texts, titled, pool, frozenset(enabled), tuple(of_passage(ev.aliases, ev, i) for i in windows),
                  tuple(_title(ev, i) for i in windows))


def _title(ev, i: int) -> str:
    return of_passage(ev.titles, ev, i)


def of_passage(per_passage: list, ev, i: int) -> str:
    """What `per_passage` holds for window i's passage ("" when it holds nothing for it)."""
    k = int(ev.passage_index[i])
    return per_passage[k] if 0 <= k < len(per_passage) else ""
