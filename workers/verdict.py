"""Verdict assembly: a claim's final `ClaimState` → the published `Verdict` (schemas/verdict.schema.json).

Kept apart from the runner (workers/pipeline.py) so that what a chat app reads — label,
probabilities, evidence shown, status, rationale — is decided in one place, whichever entry point
(stream worker, `dialcheck check`, `dialcheck eval`) produced the state."""
from __future__ import annotations

from dataclasses import dataclass, replace

from schemas import LABELS, Evidence, Status, Surface, Verdict, claim_id
from schemas.items import CheckItem, GivenPassage
from schemas.protocols import CONTRADICTION, ENTAILMENT, NEUTRAL

from .decision import NO_EVIDENCE
from .display import DisplayPolicy, display_of
from .state import ClaimState
from .windows import normalise

# e2e: below this lexical pre-score the deciding window hardly mentions the claim's words; the
# verdict stays ok (a decision was made) and its rationale summary says so
WEAK_EVIDENCE_PRESCORE = 0.15


@dataclass(frozen=True)
class VerdictContext:
    """What a verdict says about how it was made (the same for every claim of a pipeline)."""
    protocol: str
    model_versions: dict
    display: DisplayPolicy | None = None  # None: the constant rule (workers/display/)


def assemble(st: ClaimState, ctx: VerdictContext) -> Verdict:
    """The verdict of one claim: its decision rendered (label, probabilities, evidence shown,
    status, rationale); no decision (an outage before or in verification, or a turn not checked)
    is rendered as nothing read."""
    d, best = st.decision, st.best
    label, probs = (d.label, d.probabilities) if d is not None else ("NOT ENOUGH INFO", dict(NO_EVIDENCE))
    evidence = []
    for w in shown_windows(best, st.decisions):
        p = st.passages[w.window.passage_index]
        evidence.append(Evidence(p.id, p.title, p.text, w.window.text, float(p.score) if p.score else None,
                                 round(w.window.prescore, 4), float(w.probs[ENTAILMENT]),
                                 float(w.probs[NEUTRAL]), float(w.probs[CONTRADICTION]), p.url,
                                 passage_source(st, w.window.passage_index, ctx.protocol)))
    if label not in LABELS:  # a decision method or judge that made up a label: refused, not published
        raise ValueError(f"decision label {label!r} is not one of {LABELS} (rule {getattr(d, 'rule', None)!r})")
    decided = d if best is not None else None  # a decision on a window read
    state = status(st, ctx.protocol, decided.evidence if decided else "none")
    basis = decided.basis if decided else None  # None when a later stage replaced the method's label
    display = display_of(d, st.evidence, state, ctx.display)  # first: it may run the structural check
    checks = basis.checks if basis is not None else None
    return Verdict(rationale=rationale(st, label, best, ctx),
                   conversation_id=st.item.conversation_id, turn_id=st.item.turn_id,
                   claim_id=claim_id(st.item.conversation_id, st.item.turn_id, st.item.claim), claim=st.item.claim,
                   surface=st.fv_surface or Surface("r0", st.item.claim), label=label, probabilities=probs,
                   evidence=evidence, model_versions=dict(ctx.model_versions), timings_ms=dict(st.timings),
                   status=state, display=display,
                   uncovered=list(basis.uncovered) if basis is not None and basis.uncovered else None,
                   mismatches=checks.mismatches() if checks is not None else None)


def passage_source(st: ClaimState, index: int, protocol: str) -> str:
    """Where the verifier's passage `index` came from (evidence `source`, schema 2.4): retrieved
    ("index") unless the protocol reads given passages (fv: the item's `gold_evidence`, in order),
    then the GivenPassage's own source; a DialFact (title, text) pair was given with its turn."""
    if protocol != "fv":
        return "index"
    given = st.item.gold_evidence or []
    passage = given[index] if 0 <= index < len(given) else None
    return passage.source if isinstance(passage, GivenPassage) else "turn"


def status(st: ClaimState, protocol: str, evidence: str = "none") -> Status:
    """ok, degraded or error. An ok verdict's reason is null unless the check could not read any
    evidence (no passage retrieved): how well the evidence bears on the claim is `evidence`, a turn
    that is not check-worthy is said by the rationale, a weak pre-score by its summary."""
    if st.problems:
        state = "error" if any(s == "error" for s, _ in st.problems) else "degraded"
        return Status(state, "; ".join(r for _, r in st.problems), evidence)
    if st.notes.get("language"):  # out of the verifier's language scope: said in the status, never a badge
        return Status("ok", st.skip_reason, "none")
    if st.skip_reason:
        return Status("ok", None, "none")
    if protocol == "e2e" and not st.passages:
        return Status("ok", "no passage retrieved", "none")
    return Status("ok", None, evidence)


def rationale(st: ClaimState, label: str, best, ctx: VerdictContext) -> dict:
    """Which method decided, on which numbers, reading which window (verdict.schema.json): the
    numbers are the deciding window's and those the `Decision` quotes."""
    if any(s == "error" for s, _ in st.problems):
        rule = "error"
    elif st.notes.get("language"):
        rule = "out-of-scope"
    elif st.skip_reason:
        rule = "not-check-worthy"
    elif not st.decisions or st.decision is None:
        rule = "no-evidence"
    else:
        rule = st.decision.rule
    numbers: dict = {}
    window = None
    if best is not None:
        e, n, c = (round(float(best.probs[i]), 4) for i in (ENTAILMENT, NEUTRAL, CONTRADICTION))
        numbers.update(entail=e, neutral=n, contradict=c, prescore=round(best.window.prescore, 4))
        if st.decision is not None:
            numbers.update(st.decision.numbers)
        p = st.passages[best.window.passage_index]
        window = {"passage_id": p.id, "title": p.title, "text": best.window.text}
    numbers["windows_read"] = len(st.decisions)
    what = {"error": "a backend failed, so nothing was decided", "no-evidence": "no evidence window was read",
            "not-check-worthy": f"{st.skip_reason} — the turn states no checkable fact",
            "out-of-scope": st.skip_reason}.get(rule)
    summary = (f"{label}: {what}." if what else
               f"{label} by {rule} over {len(st.decisions)} window(s); deciding window from '{window['title']}' "
               f"(entail {numbers['entail']:.2f}, contradict {numbers['contradict']:.2f}).")
    if not what and st.decision is not None and st.decision.note:
        summary += " " + st.decision.note
    if ctx.protocol == "e2e" and best is not None and best.window.prescore < WEAK_EVIDENCE_PRESCORE:
        # not "weak evidence": that word is status.evidence's (the claim's key terms covered), which
        # can be strong while the window's wording is far from the claim's
        summary += (f" Few shared words: the deciding window's wording is far from the claim's "
                    f"(lexical pre-score {best.window.prescore:.2f} < {WEAK_EVIDENCE_PRESCORE}).")
    return {"rule": rule, "numbers": numbers, "window": window, "summary": summary, **st.notes}


def turn_summary(item: CheckItem, claims: list[Verdict], label: str,
                 order: str = "REFUTES > SUPPORTS > NOT ENOUGH INFO") -> Verdict:
    """The turn's own verdict over its claims' verdicts: the worst label (by `order`, in words), that
    claim's evidence and display (the same label, probabilities and status, so the same hint)."""
    worst = next(v for v in claims if v.label == label)
    why = {"rule": "turn-summary", "numbers": {"claims": len(claims)}, "window": (worst.rationale or {}).get("window"),
           "summary": f"{label}: the worst of {len(claims)} claims ({order}); "
                      f"claim ids {', '.join(v.claim_id for v in claims)}."}
    return replace(worst, claim=item.claim, surface=Surface("r0", item.claim), label=label,
                   claim_id=claim_id(item.conversation_id, item.turn_id, item.claim), rationale=why)


def shown_windows(best, decisions: list, n: int = 3) -> list:
    """The windows a verdict lists as evidence: the deciding window first, then the most decided
    (highest entail or contradict) others, each text once — near-duplicates folded too (the same
    words after normalisation: "African American" / "African-American" copies of one passage)."""
    ranked = sorted(decisions, key=lambda d: -max(d.probs[ENTAILMENT], d.probs[CONTRADICTION]))
    first_by_text: dict = {}
    for d in ([best] if best else []) + ranked:
        first_by_text.setdefault(tuple(normalise(d.window.text)) or d.window.text, d)
    return list(first_by_text.values())[:n]
