"""The Python API: `from dialcheck import Checker`, for notebooks, scripts and researchers who
compare verifiers (peers are libraries too: MiniCheck's `score`, AlignScore's `score`).

    checker = Checker.load()                       # models and index loaded once (~10-60 s)
    v = checker.check("Elvis was born in Tupelo.", context=["Where was Elvis born?"])
    v.label, v.probabilities[v.label], v.evidence[0].title, v.display.show

The same checker as the stream worker and `dialcheck check` (dialcheck/wiring.py `load_checker`,
the default Pipeline, the same settings from DIALCHECK_* and the settings file); the same input
rules and limits as a chat turn (dialcheck/check_input.py, shared with serve-api); verdicts are the
published schema's (schemas.Verdict, `to_dict()` / `to_json()` give schemas/verdict.schema.json),
scrubbed of secrets like every verdict that leaves the process. No Kafka, no HTTP.
"""
from __future__ import annotations

import itertools
import threading
from typing import Any, Iterable, Mapping, Sequence

from schemas.errors import Reason
from schemas.items import CheckItem
from schemas.settings import Settings, load_settings
from schemas.verdict import Verdict

from .check_input import PROTOCOLS, InvalidInput, Limits, check_item, clean_text

CONVERSATION = "python"


def _settings(settings: Settings | Mapping[str, Any] | None) -> Settings:
    """None: the settings as everything else loads them; a mapping: sections of overrides on top
    (e.g. {"retrieval": {"index_dir": "my-index"}})."""
    if settings is None:
        return load_settings()
    if isinstance(settings, Settings):
        return settings
    if isinstance(settings, Mapping):
        return load_settings(**settings)
    raise InvalidInput(400, Reason.SCHEMA.value, "settings must be a Settings, a mapping of sections or None")


class Checker:
    """Checks claims with dialcheck's pipeline, models loaded once (`Checker.load`). Safe to share
    between threads (one check at a time, as the stream's pipeline thread)."""

    def __init__(self, pipe, settings: Settings, protocol: str = "e2e"):
        self._pipe, self.settings, self.protocol = pipe, settings, protocol
        self._limits = Limits.of(settings)
        self._lock = threading.Lock()
        self._turn_ids = itertools.count()  # a turn id per checked item: claim ids differ between calls

    @classmethod
    def load(cls, protocol: str = "e2e", surface: str | None = None,
             settings: Settings | Mapping[str, Any] | None = None) -> "Checker":
        """Load the models (and, for protocol "e2e", the passage index: built on first use) once.
        protocol "e2e": the evidence is retrieved, unless a check gives its own (grounded: checked as
        "fv" checks); "fv": each check gives its evidence. With settings {"grounding": {"only": True}}
        no index is loaded and a check without evidence is NOT ENOUGH INFO.
        surface: the claim surface checked (None: DIALCHECK_SURFACE, as the stream)."""
        from schemas.protocols import SURFACES

        if protocol not in PROTOCOLS:
            raise InvalidInput(400, Reason.SCHEMA.value, f"unknown protocol {protocol!r}: choose from {', '.join(PROTOCOLS)}")
        if surface is not None and surface not in SURFACES:
            raise InvalidInput(400, Reason.SCHEMA.value, f"unknown surface {surface!r}: choose from {', '.join(SURFACES)}")
        s = _settings(settings)
        if protocol != "fv" and not s.grounding.only:  # the index is built on first use: its source files must be there
            from dialcheck.commands.data import require_index_sources

            require_index_sources(s)
        from dialcheck.wiring import load_checker

        return cls(load_checker(s, protocol=protocol, surface=surface), s, protocol)

    @property
    def load_report(self) -> str:
        """What loading cost, in one line ("" for a checker not built by `load`)."""
        report = getattr(self._pipe, "load_report", None)
        return report() if callable(report) else ""

    def check(self, claim: str, *, evidence: Sequence[str | Mapping[str, Any]] | None = None,
              context: Sequence[str] = ()) -> Verdict:
        """One claim → its verdict. `context`: the conversation's previous turns, oldest first (they
        resolve pronouns, as in the stream); `evidence`: the passages to check against instead of
        retrieving (a grounded turn's: strings or {"text", "title", "url", "id"}, schemas/evidence.py;
        the verdict's evidence keeps their id, title and url, `source` "turn"). Invalid input raises
        InvalidInput (a ValueError) with one short line."""
        return self.check_turn(claim, evidence=evidence, context=context)[-1]

    def check_turn(self, claim: str, *, evidence: Sequence[str | Mapping[str, Any]] | None = None,
                   context: Sequence[str] = ()) -> list[Verdict]:
        """A reply → every verdict the stream publishes for it: with `DIALCHECK_SEGMENT=1` (settings
        {"claims": {"segment": True}}) and several claims, each claim's verdict (its `claim_span` in the
        reply) and then the reply's own; otherwise the one verdict of `check`. What a chat UI
        underlines (docs/integration.md#grounded-turns)."""
        fields = {"claim": claim, "context": context if isinstance(context, str) else list(context),
                  **({} if evidence is None else {"evidence": evidence})}
        return self._checked([self._item(fields)])[0]

    def check_many(self, items: Iterable[str | Mapping[str, Any]]) -> list[Verdict]:
        """Many claims in one pipeline call, as the stream checks a batch; a verdict per item, in
        order. An item is a claim (str) or a mapping with "claim" and optionally "context",
        "evidence" and "conversation_id" (serve-api's request fields). Every item is validated
        before anything is checked: one invalid item raises InvalidInput naming it."""
        checks = []
        for i, item in enumerate(items):
            try:
                checks.append(self._item({"claim": item} if isinstance(item, str) else item))
            except InvalidInput as e:
                raise InvalidInput(e.status, e.code, f"item {i}: {e.message}") from None
        return [verdicts[-1] for verdicts in self._checked(checks)]

    def _item(self, fields) -> CheckItem:
        if not isinstance(fields, Mapping):
            raise InvalidInput(400, Reason.SCHEMA.value, "a claim (str) or a mapping with \"claim\"")
        return check_item({"conversation_id": CONVERSATION, **fields}, self._limits, self.protocol,
                          turn_id=f"python-{next(self._turn_ids)}")

    def _checked(self, checks: list[CheckItem]) -> list[list[Verdict]]:
        """One check_turns call (under the lock); per item every verdict (the turn's own last), scrubbed."""
        if not checks:
            return []
        with self._lock:
            turns = self._pipe.check_turns(checks)
        scrub = getattr(self._pipe, "scrub", None)
        return [[scrub.verdict(v) if scrub is not None else v for v in t.verdicts] for t in turns]

    def score(self, evidence: str | Sequence[str], claims: str | Sequence[str]) -> list[float]:
        """p(SUPPORTS) for each (evidence, claim) pair: the verifier's calibrated entailment
        probability, each evidence text read whole as the premise (no retrieval, no claim rewriting,
        no decision rule: the number to compare with other verifiers' scores). One evidence text
        with many claims, many with one, or two lists of the same length."""
        from schemas.protocols import NLI_LABELS

        premises = [evidence] if isinstance(evidence, str) else list(evidence)
        hypotheses = [claims] if isinstance(claims, str) else list(claims)
        if len(premises) == 1 and len(hypotheses) > 1:
            premises = premises * len(hypotheses)
        elif len(hypotheses) == 1 and len(premises) > 1:
            hypotheses = hypotheses * len(premises)
        if len(premises) != len(hypotheses):
            raise InvalidInput(400, Reason.SCHEMA.value, f"{len(premises)} evidence texts for {len(hypotheses)} claims: "
                               "give one of either, or as many of each")
        premises = [clean_text(t, f"evidence[{i}]", self._limits) for i, t in enumerate(premises)]
        hypotheses = [clean_text(t, f"claims[{i}]", self._limits, "assistant") for i, t in enumerate(hypotheses)]
        if not premises:
            return []
        with self._lock:
            probs = self._pipe.nli.predict(premises, hypotheses)
        column = NLI_LABELS.index("entailment")
        return [float(row[column]) for row in probs]


__all__ = ["Checker", "InvalidInput"]
