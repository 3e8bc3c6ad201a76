"""The cascade judge: after verification, an LLM re-judges the claims the verifier is unsure
about, citing one of the verifier's own windows (a larger model where the small NLI is weakest,
at the cost of only the claims that need it).

Which claims: those whose verdict would not be shown to end users (the display hint of their
`Decision`, `workers/display` `display_of`, the one the verdict publishes, is not shown) and that the
NLI labelled SUPPORTS or REFUTES (a low-confidence or weak-evidence verdict), plus the NOT ENOUGH INFO
verdicts whose deciding window is on the claim's topic (`Decision.coverage` ≥ the decision's
on-topic level, `decision.sufficiency.ON_TOPIC` by default). The judge reads the decision; it works none of it out again.
An NEI is never shown, so NEI on off-topic evidence is left alone: there is nothing on the claim's
subject for a judge to read. Claims with no window read,
not check-worthy claims and claims a backend failed on are never asked.

What it is shown: the claim, the last `CONTEXT_TURNS` dialogue turns, and the verifier's top windows
(ranked by max(entail, contradict), at most `llm.judge_top_windows` ≤ 5) numbered [1]..[k]. It is
asked to reason step by step and end with exactly two lines, `LABEL: SUPPORTS|REFUTES|NOT ENOUGH
INFO` and `WINDOW: <n>`. `parse_answer` is strict: anything else is ignored.

What changes: only a parsed answer citing an existing window (1..k) is used; then the claim's
decision is `Decision.rejudged`: the judge's label and the cited window (the evidence shown first).
The probabilities are left as the NLI computed them: the judge gives no calibrated number, so a
replaced label's confidence is the NLI's probability of that label, and the display rule decides on
it as before. The rule, numbers, coverage and evidence strength stay the NLI decision method's (kept
whole in `method_decision`), so the rationale and `status.evidence` still describe what the NLI
decided. Every asked claim (and every claim the stage saw) gets `notes["judge"]` = {label, window,
nli_label, used, reason, answer (truncated), model}: the NLI's own label is always recoverable from
the verdict's rationale.

What fails how: at most `llm.judge_max_calls_per_batch` requests per batch (the rest, in batch
order, keep the NLI verdict, status unchanged, reason "over the judge's budget"); a timeout, a
refused connection, an HTTP error or an answer without content is an outage of the judge: the NLI
verdict stands and its status is degraded with the reason — never an error, never a lost claim. An
answer that does not parse or cites a window that does not exist is the model's failure, not the
endpoint's: the NLI verdict stands, status untouched, and `notes["judge"]["reason"]` says why."""
from __future__ import annotations

import re

from schemas import Status
from schemas.protocols import CONTRADICTION, ENTAILMENT, LLM, LLMUnavailable
from schemas.secrets import Scrubber, url_passwords
from schemas.settings import LLMSettings

from ..decision.sufficiency import ON_TOPIC
from ..display import display_of
from ..state import BaseStage, ClaimState, component
from ..text import last_turns
from .client import client_for
from .replies import COUNTS, UNAVAILABLE, judge_kind

CONTEXT_TURNS = 3
MAX_WINDOWS = 5
ANSWER_CHARS = 600  # the answer's tail kept in the rationale (the reasoning before it is cut)
LABELS = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")
CLAIM_LINE = "Claim to judge: "  # the line the stand-in server (tests/llm_standin.py) recognises

SYSTEM = ("You are a careful fact-checker. You judge whether numbered evidence windows support or refute a claim "
          "made in a dialogue, using only those windows, never your own knowledge.")
INSTRUCTIONS = (
    "Think step by step: say what the claim asserts (resolve pronouns from the dialogue), then check it against each "
    "window that is about the same subject. SUPPORTS: a window states what the claim asserts. REFUTES: a window about "
    "the same subject states something the claim contradicts. NOT ENOUGH INFO: no window settles it.\n"
    "End your answer with exactly these two lines and nothing after them:\n"
    "LABEL: SUPPORTS or LABEL: REFUTES or LABEL: NOT ENOUGH INFO\n"
    "WINDOW: <the number of the window your label rests on (for NOT ENOUGH INFO, the one closest to settling it)>")
_KIND_SAYS = {"empty": "empty", "truncated": "cut off at max_tokens", "echo": "it repeats the prompt",
              "explanation": "a label with words after or around it", "wrong-format": "not the asked format"}
_LABEL_LINE = re.compile(r"LABEL: (SUPPORTS|REFUTES|NOT ENOUGH INFO)")
_WINDOW_LINE = re.compile(r"WINDOW: ([0-9]{1,3})")


def judge_client(settings: LLMSettings) -> LLM | None:
    """The shared client (workers/llm/client.py: retries, per-request timeout, batch budget) with the
    judge's own timeout and completion length; None when no endpoint is configured."""
    return client_for(settings.model_copy(update={"timeout_s": settings.judge_timeout_s,
                                                  "max_tokens": settings.judge_max_tokens}))


def ranked_windows(s: ClaimState, k: int) -> list:
    """The claim's window decisions most decided first (max(entail, contradict)), the top k."""
    k = max(1, min(k, MAX_WINDOWS))
    return sorted(s.decisions, key=lambda d: -max(float(d.probs[ENTAILMENT]), float(d.probs[CONTRADICTION])))[:k]


def prompt(context: list[str], claim: str, windows: list[tuple[str, str]]) -> list[dict]:
    """Chat messages for one claim; `windows` = (title, text) in the order they are numbered."""
    turns = "\n".join(f"- {t}" for t in last_turns(context, CONTEXT_TURNS)) or "- (no earlier turns)"
    ev = "\n".join(f"[{i}] ({title or 'untitled'}) {text}" for i, (title, text) in enumerate(windows, 1))
    user = f"Dialogue (last turns):\n{turns}\n{CLAIM_LINE}{claim}\nEvidence windows:\n{ev}\n\n{INSTRUCTIONS}"
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def parse_answer(text: str) -> tuple[str, int] | None:
    """(label, window number) when the answer's last two non-blank lines are exactly `LABEL: …` and
    `WINDOW: <n>` (surrounding blanks aside); None for anything else."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    if len(lines) < 2:
        return None
    label, window = _LABEL_LINE.fullmatch(lines[-2]), _WINDOW_LINE.fullmatch(lines[-1])
    if label is None or window is None:
        return None
    return label.group(1), int(window.group(1))


def _tail(text: str, scrub: Scrubber) -> str:
    """The answer's end for the rationale, credentials masked (a model may echo what it was sent,
    and the pipeline's scrubber reads status reasons, not the rationale)."""
    text = scrub(text.strip())
    return text if len(text) <= ANSWER_CHARS else "…" + text[-ANSWER_CHARS:]


@component(reads=("item", "decision", "decisions", "evidence", "passages", "skip_reason"),
           writes=("decision", "notes", "problems"), can=("display", "degrade"))
class JudgeStage(BaseStage):
    """The cascade judge as a pipeline stage (workers/stages.py's interface), after VerifyStage."""
    name = "judge"

    def __init__(self, llm: LLM | None, settings: LLMSettings, on_topic: float = ON_TOPIC, display=None):
        self.llm, self.settings, self.on_topic = llm, settings, float(on_topic)
        self.display = display  # the pipeline's display policy (None: the constant rule)
        self.scrub = Scrubber([settings.api_key.get_secret_value(), *url_passwords(settings.url)])

    @classmethod
    def of(cls, settings: LLMSettings, decision, display=None) -> "JudgeStage":
        """The stage for a pipeline: its client, and the decision method's on-topic level."""
        return cls(judge_client(settings), settings, decision.on_topic, display)

    # ---- which claims ------------------------------------------------------------------------------
    def unsure(self, s: ClaimState) -> bool:
        """Would the verdict not be shown (S/R), or is it NEI on on-topic evidence? Only claims the
        verifier decided on windows it read, with no backend failure."""
        d = s.decision
        if d is None or d.window is None or not s.decisions or s.skip_reason or \
                any(k == "error" for k, _ in s.problems):
            return False
        if d.label == "NOT ENOUGH INFO":
            return d.coverage is not None and d.coverage >= self.on_topic
        # the status the verdict gives it: degraded by a problem (errors are never asked), else ok
        state = Status("degraded" if s.problems else "ok", None, d.evidence)
        return not display_of(d, s.evidence, state, self.display).show

    # ---- the stage ---------------------------------------------------------------------------------
    def run(self, states: list[ClaimState]) -> None:
        ask: list[tuple[ClaimState, list]] = []
        for s in states:
            if s.decision is None:
                continue  # nothing was decided (an outage before or in verification)
            note = {"label": None, "window": None, "nli_label": s.decision.label, "used": False, "reason": "",
                    "answer": None, "reply": None}
            s.notes["judge"] = note
            if not self.unsure(s):
                note["reason"] = "not asked: the NLI verdict is shown, or NEI on off-topic evidence or no evidence"
            elif len(ask) >= self.settings.judge_max_calls_per_batch:
                note["reason"] = (f"not asked: over the judge's budget ({self.settings.judge_max_calls_per_batch} "
                                  f"calls per batch); the NLI verdict stands")
            else:
                ask.append((s, ranked_windows(s, self.settings.judge_top_windows)))
        if not ask:
            return
        if self.llm is None:
            return self._outage([s for s, _ in ask], "no LLM configured (DIALCHECK_LLM_URL)")
        try:
            model = self.llm.model
        except LLMUnavailable as e:
            return self._outage([s for s, _ in ask], str(e))
        # the claim as said (the dialogue beside it resolves its pronouns), not the verifier's surface
        convs = [prompt(s.item.context, s.item.claim,
                        [(s.passages[d.window.passage_index].title, d.window.text) for d in wins]) for s, wins in ask]
        for (s, wins), conv, reply in zip(ask, convs, self.llm.complete_many(convs)):
            note = s.notes["judge"]
            note["model"] = model
            if isinstance(reply, LLMUnavailable):
                COUNTS.count("judge", UNAVAILABLE)
                self._outage([s], str(reply))
                continue
            note["answer"] = _tail(reply, self.scrub)
            parsed = parse_answer(reply)
            if parsed is None:
                note["reply"] = kind = judge_kind(reply, conv)
                COUNTS.count("judge", kind)
                note["reason"] = (f"answer ignored ({_KIND_SAYS[kind]}): it does not end with the LABEL and WINDOW "
                                  f"lines; NLI verdict kept")
                continue
            note["label"], note["window"] = parsed
            label, n = parsed
            if not 1 <= n <= len(wins):
                note["reply"] = "wrong-format"
                COUNTS.count("judge", "wrong-format")
                note["reason"] = f"answer ignored: it cites window {n}, not one of 1..{len(wins)}; NLI verdict kept"
                continue
            note["reply"] = "ok"
            COUNTS.count("judge", "ok")
            cited = next(k for k, d in enumerate(s.decisions) if d is wins[n - 1])
            s.decision = s.decision.rejudged(label, cited)
            note["used"] = True
            note["reason"] = ("judge agrees with the NLI" if label == note["nli_label"] else
                              f"label replaced by the LLM judge (NLI said {note['nli_label']})") + \
                f"; deciding window [{n}]; probabilities are the NLI's"

    def _outage(self, states: list[ClaimState], why: str) -> None:
        for s in states:
            s.problems.append(("degraded", f"LLM judge unavailable, NLI verdict kept: {why}"))
            s.notes["judge"].update(reason=f"judge unavailable: {why}")

    def on_outage(self, states: list[ClaimState], error: Exception) -> None:
        """The judge calls no model or search of its own; a declared outage here leaves the NLI verdict."""
        for s in states:
            if "judge" in s.notes and not s.notes["judge"]["used"]:
                s.problems.append(("degraded", f"LLM judge unavailable, NLI verdict kept: {error}"))
