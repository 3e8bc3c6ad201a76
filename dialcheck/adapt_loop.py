"""The adaptation loop (`dialcheck adapt-loop`): the verifier adapts to the deployment's traffic, is
tried, put in use and taken out again without a person, each step recorded in the feedback store.

Each tick (every `check_every_s`), under a lock file beside the model directory:
1. **rollback**: the live version's shown badges, judged by trusted sources after it went live,
   counted one vote per conversation (`badge_votes`); when the drift alarm fires for it (the upper
   end of the Clopper–Pearson interval below the target it certified) and a previous version is
   kept, the previous one is moved back and the worker signalled (event `rolled_back`);
2. **challenger**: a candidate waiting in `<live>-candidates/` is scored on the judgements that
   arrived after it was built, of the live model's verdicts (no second model on the live path: the
   same judged replies re-scored offline by both); `challenger_gate` decides (event `scored`), and it
   is promoted (`promoted`: the live one kept as `<live>-previous`, two renames, SIGHUP) or refused
   (`refused`, moved to `<live>-retired/`);
3. **build**: when no candidate waits, `every_s` has passed since the last build and `min_new` new
   conversations were judged, `dialcheck adapt --from-feedback` runs (a child process: minutes of
   torch on the CPU, never inside the worker) into the candidates folder (`built`, or `not_built`
   with adapt's one line).

Where the state lives: in the model folder (what is live, previous, waiting, retired) and in the
feedback store's model_events (when a challenger was built, what was decided); no state file of
its own, so a restarted loop goes on where it was. Why a process of its own and not a worker
option: training takes minutes of both cores and a torch import; inside the worker it would stall
checking, and a crash in training would take the stream down with it.

Why feedback cannot steer it: only `sources` (moderator, annotator by default; `user` clicks never)
count; a claim judged both ways is dropped; a conversation counts once in every count the loop
decides on (the build's minimum, the challenger's paired test, the rollback's precision), so a
flood in one conversation is one vote."""
from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from dialcheck.model_switch import SwitchRefused, Versions, version_of
from schemas.errors import DialcheckError

TRUSTED = ("moderator", "annotator")
ADAPT_TIMEOUT_S = 4 * 3600


@dataclass(frozen=True)
class Layout(Versions):
    """The live model directory and the folders beside it the loop keeps (same file system: renames):
    the switch's (`Versions`: versions, previous, retired, journal) and the loop's own."""

    @property
    def candidates(self) -> Path:
        return self._beside("-candidates")

    @property
    def lock(self) -> Path:
        return self.live.with_name(f".{self.live.name}.loop.lock")

    @property
    def running(self) -> Path:
        return self.live.with_name(f".{self.live.name}.loop.running")

    def waiting(self) -> list[Path]:
        """Candidate directories ready to be scored (a build in progress is a dot folder)."""
        if not self.candidates.is_dir():
            return []
        return sorted(p for p in self.candidates.iterdir()
                      if p.is_dir() and not p.name.startswith(".") and (p / "model.onnx").is_file())


@dataclass
class LoopOptions:
    every_s: float = 6 * 3600  # at most one build per this
    check_every_s: float = 60.0  # how often rollback and challenger are looked at
    min_new: int = 50  # new judged conversations before a build, and before a challenger is scored
    sources: tuple = TRUSTED
    confidence: float = 0.95  # of the challenger's paired test (one-sided)
    target: float = 0.85  # the rollback's target when the live model certifies none
    alarm_confidence: float = 0.9  # of the rollback's precision interval (two-sided, as /metrics')
    adapt_args: tuple = ()  # passed to `dialcheck adapt` (e.g. --folds 2)
    adapt_timeout_s: float = ADAPT_TIMEOUT_S
    protocol: str = "e2e"  # the worker's: whose decision file a candidate is checked with
    metrics_urls: tuple = ()  # each worker's /metrics, asked after a switch whether it serves the new version
    confirm_s: float = 60.0  # how long a worker has to report the new version


def certified_target(model_dir: Path, default: float) -> float:
    """The precision the live model's display certified (display.json `certified.target`, else
    adapt.json's certificate), else `default`: what its shown badges are held to."""
    d = Path(model_dir)
    with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
        t = json.loads((d / "display.json").read_text()).get("certified", {}).get("target")
        if t:
            return float(t)
    with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
        t = json.loads((d / "adapt.json").read_text()).get("certificate", {}).get("target")
        if t:
            return float(t)
    return default


def certificate_holds(model_dir: Path) -> tuple[bool, str]:
    """A challenger's own certificate: adapt wrote it with some target certified (badges shown)."""
    try:
        c = json.loads((Path(model_dir) / "adapt.json").read_text()).get("certificate") or {}
    except (OSError, ValueError):
        return False, "no adapt.json"
    if c.get("target") is None:
        return False, f"its display certifies nothing ({c.get('line') or 'no badge shown'})"
    return True, str(c.get("line") or f"certified at {c['target']}")


# --- counting: trusted, one claim once, one conversation once -----------------------------------

def badge_votes(judged: Iterable, version: str, sources: Sequence[str] = TRUSTED) -> tuple[dict, dict]:
    """Judged shown badges of `version`'s verdicts → ({bucket: (right, wrong)}, what was left out),
    one vote per conversation and bucket: a claim judged right and wrong (by two sources) is dropped,
    then each conversation votes by its majority of judged claims (a tie votes not). Why: the
    rollback must not be a flood's to trigger or to hold back."""
    from lab.nli.judged import latest_judgements
    from streams.precision import buckets_of

    claims: dict = defaultdict(list)
    for j in latest_judgements(judged, sources)[0]:
        if j.nli_version != version or j.judgement not in ("right", "wrong"):
            continue
        claims[j.claim_key].append(j)
    per_conv: dict = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    left = Counter()
    for (conv, _, _), js in claims.items():
        if len({j.judgement for j in js}) > 1:
            left["conflicting"] += 1
            continue
        j = js[-1]
        for b in buckets_of(j.label_shown, j.confidence_shown, j.shown):
            per_conv[conv][b][0 if j.judgement == "right" else 1] += 1
    votes: dict = defaultdict(lambda: [0, 0])
    for conv, buckets in per_conv.items():
        for b, (r, w) in buckets.items():
            if r == w:
                left["tied_conversation"] += 1
            else:
                votes[b][0 if r > w else 1] += 1
            left["same_conversation"] += max(r + w - 1, 0)
    return {b: (r, w) for b, (r, w) in votes.items()}, {k: n for k, n in left.items() if n}


def drift(judged: Iterable, version: str, target: float, confidence: float,
          sources: Sequence[str] = TRUSTED) -> dict:
    """The rollback rule's numbers for `version`: per bucket the precision interval over
    conversations (streams/precision.py, the /metrics alarm's function) and whether it fires."""
    from streams.precision import BUCKETS, precision_row

    votes, left = badge_votes(judged, version, sources)
    rows = [precision_row(b, *votes.get(b, (0, 0)), target=target, confidence=confidence) for b in BUCKETS]
    fired = [r for r in rows if r.alarm]
    return {"alarm": bool(fired), "target": target, "confidence": confidence, "left_out": left,
            "rows": {r.label: {"right": r.right, "wrong": r.wrong, "upper": None if r.upper is None else round(r.upper, 4)}
                     for r in rows},
            "why": "; ".join(f"{r.label} badges right {r.right} of {r.n} conversations, upper end {r.upper:.3f} "
                             f"< target {target}" for r in fired)}


def new_pairs(judged: Iterable, since: float, version: str | None, sources: Sequence[str] = TRUSTED,
              scored_only: bool = True) -> list:
    """Judged replies (lab/nli/judged.py pairs, each claim once, conflicts dropped) whose judgements
    all arrived after `since` (a claim judged before was there to learn from), of `version`'s verdicts
    (any version when None); `scored_only`: those that say whether the reply is supported (what the
    challenger is scored on), else every pair `dialcheck adapt` trains on (what a build counts)."""
    from lab.nli.judged import dedupe, from_feedback

    judged = list(judged)
    seen = {j.claim_key for j in judged if float(j.received_at or 0.0) <= since}  # a claim judged before is not new
    js = [j for j in judged if float(j.received_at or 0.0) > since and j.claim_key not in seen
          and (version is None or j.nli_version == version)]
    pairs, _ = from_feedback(js, sources)
    pairs, _ = dedupe(pairs)
    return [p for p in pairs if p.supported is not None] if scored_only else pairs


def conversations(pairs: Sequence) -> int:
    return len({p.group for p in pairs})


def challenger_gate(pairs: Sequence, p_champion: Sequence[float], p_challenger: Sequence[float],
                    min_new: int, confidence: float) -> dict:
    """The paired comparison on the same new judged replies: per conversation the mean Brier score of
    p(entailment) (the probability a SUPPORTS badge rests on) against whether the reply is supported,
    champion minus challenger; the challenger wins when the one-sided Wilcoxon signed-rank test says
    it is lower at `confidence` over at least `min_new` conversations. Why per conversation: one
    conversation is one vote (a flood cannot carry it); why Brier: a proper score of the probability
    the display thresholds, so a challenger that ranks better but says wrong things loudly loses."""
    from scipy.stats import wilcoxon

    from lab.nli.adapt_run import roc_auc

    y = np.array([bool(p.supported) for p in pairs], float)
    a, b = np.asarray(p_champion, float), np.asarray(p_challenger, float)
    groups: dict = defaultdict(list)
    for i, p in enumerate(pairs):
        groups[p.group].append(i)
    diff = np.array([np.mean((a[ix] - y[ix]) ** 2) - np.mean((b[ix] - y[ix]) ** 2) for ix in groups.values()])
    out = {"replies": len(pairs), "conversations": len(groups), "min_new": min_new, "confidence": confidence,
           "brier_champion": round(float(np.mean((a - y) ** 2)), 4) if len(y) else None,
           "brier_challenger": round(float(np.mean((b - y) ** 2)), 4) if len(y) else None,
           "auc_champion": roc_auc(a, y) if len(y) else None, "auc_challenger": roc_auc(b, y) if len(y) else None,
           "wins": int((diff > 0).sum()), "losses": int((diff < 0).sum())}
    if len(groups) < min_new:
        return {**out, "promote": False, "p_value": None,
                "why": f"{len(groups)} new judged conversations, {min_new} needed"}
    if not np.any(diff):
        return {**out, "promote": False, "p_value": 1.0, "why": "the challenger scores the new replies as the champion"}
    p_value = float(wilcoxon(diff, alternative="greater", zero_method="zsplit").pvalue)
    promote = p_value <= 1.0 - confidence
    why = (f"Brier {out['brier_champion']} → {out['brier_challenger']} on {len(pairs)} replies in {len(groups)} "
           f"conversations (better in {out['wins']}, worse in {out['losses']}; one-sided Wilcoxon p {p_value:.4f} "
           f"{'≤' if promote else '>'} {round(1.0 - confidence, 4)})")
    return {**out, "promote": promote, "p_value": round(p_value, 6), "why": why}


# --- the loop -----------------------------------------------------------------------------------

class LoopError(DialcheckError, RuntimeError):
    """A step that cannot go on (a folder missing, another loop holding the lock): one line."""


class AdaptLoop:
    """One tick at a time (`tick`), or forever (`run`). `pids` gives the worker processes to signal
    after a rename (read each time: a restarted worker has a new pid)."""

    def __init__(self, layout: Layout, store_url: str | None, opts: LoopOptions,
                 pids: Callable[[], list[int]] = list, log: Callable[[str], None] = print,
                 clock: Callable[[], float] = time.time):
        self.layout, self.store_url, self.opts = layout, store_url, opts
        self.pids, self.log, self.clock = pids, log, clock
        self.versions = Versions(layout.live)
        self.reasons: list[str] = []  # why this tick's steps did nothing

    # -- plumbing ---------------------------------------------------------------------------------
    def open_store(self):
        from streams.feedback_store import FeedbackStore

        return FeedbackStore(self.store_url)

    def locked(self):
        """One tick or switch at a time on this model directory (a loop's tick, `--promote` or
        `--rollback` by hand): each waits for the other's to end (a check loads a model: seconds)."""
        return _flock(self.layout.lock, wait=True)

    def only_loop(self):
        """One running loop per model directory, held for its life: a second is LoopError at start."""
        return _flock(self.layout.running, wait=False, busy=f"another adapt-loop runs on {self.layout.live}")

    def _signal(self) -> dict:
        """SIGHUP to each worker: it re-reads the model directory between batches (streams/reload.py)."""
        done, gone = [], []
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGHUP)
                done.append(pid)
            except ProcessLookupError:
                gone.append(pid)
        if not done:
            self.log("no worker signalled: each picks the directory up at its next start or SIGHUP")
        return {"signalled": done, **({"not_running": gone} if gone else {})}

    def _retire(self, d: Path, version: str) -> Path:
        self.layout.retired.mkdir(parents=True, exist_ok=True)
        dest, n = self.layout.retired / version, 1
        while dest.exists():
            n += 1
            dest = self.layout.retired / f"{version}.{n}"
        d.rename(dest)
        return dest

    def _record(self, store, event: str, version: str, **kw):
        e = store.add_event(event, version, ts=self.clock(), **kw)
        self.log(f"adapt-loop {event}: {version}" + (f" ({e.reason})" if e.reason else ""))
        return e

    # -- the steps ----------------------------------------------------------------------------------
    def promote(self, store, candidate: Path, reason: str, detail: dict | None = None) -> str:
        """Put `candidate` live (dialcheck/model_switch.py): checked by the worker's own reload first
        (SwitchRefused, nothing moved), one pointer swapped, the workers signalled and asked."""
        from dialcheck.model_switch import promotion

        if not (candidate / "model.onnx").is_file():
            raise LoopError(f"{candidate}: no model.onnx (not a model directory)")
        if candidate.resolve().parent not in {p.resolve() for p in (self.layout.live.parent, self.layout.candidates,
                                                                      self.versions.folder)}:
            raise LoopError(f"{candidate}: put it beside {self.layout.live} (or in {self.layout.candidates}) first: "
                            "a rename must not cross file systems")
        self.check(candidate)
        self.switch(store, lambda: promotion(self.versions, candidate, reason, detail))
        return version_of(self.layout.live)

    def rollback(self, store, reason: str, detail: dict | None = None) -> str:
        """Put the previous version back (by the drift alarm, or by hand), checked first like a promotion."""
        from dialcheck.model_switch import rollback

        self.versions.versioned()
        back = self.versions.target(self.layout.previous)
        if back is None:
            raise LoopError(f"no previous version to roll back to ({self.layout.previous} names none)")
        self.check(back)
        live = version_of(self.layout.live)
        self.switch(store, lambda: rollback(self.versions, reason, detail))
        return live

    def resume(self, store) -> None:
        """A switch a killed loop (or `--promote`) left half done is finished first."""
        from dialcheck.model_switch import resume

        resume(self.versions, store, self.clock, self.log, lambda sw: self._notify(store, sw))

    def check(self, model_dir: Path) -> None:
        from dialcheck.model_switch import acceptable

        self.log(f"adapt-loop checking {model_dir} as the worker would: {acceptable(model_dir, protocol=self.opts.protocol)}")

    def switch(self, store, plan) -> None:
        """The workers asked first (a pid file naming a dead one is an error before anything moves),
        the layout made a versioned one, the switch written down and carried out, then confirmed."""
        from dialcheck.model_switch import apply, begin

        self.pids()
        self.versions.versioned()
        s = plan()
        begin(self.versions, s)
        apply(self.versions, s, store, self.clock, self.log, notify=lambda sw: self._notify(store, sw))

    def _notify(self, store, s) -> dict:
        """SIGHUP, then each worker's /metrics must name the new version within `confirm_s`; else the
        switch is undone (a rollback switch) and WorkerRefused raised."""
        from dialcheck.model_switch import Switch, WorkerRefused, apply, begin, worker_serves

        sig = self._signal()
        if not sig["signalled"] or not self.opts.metrics_urls:
            return sig
        deadline = time.monotonic() + self.opts.confirm_s
        waiting = list(self.opts.metrics_urls)
        while waiting and time.monotonic() < deadline:
            waiting = [u for u in waiting if not worker_serves(u, s.version)]
            if waiting:
                time.sleep(0.5)
        if not waiting:
            return {**sig, "confirmed": list(self.opts.metrics_urls)}
        if s.event != "promoted":
            raise WorkerRefused(f"the worker at {waiting[0]} does not report {s.version} after a SIGHUP "
                                f"({self.opts.confirm_s:.0f} s): see its log")
        why = f"the worker at {waiting[0]} did not report {s.version} within {self.opts.confirm_s:.0f} s of a SIGHUP"
        back = Switch("rolled_back", s.version, s.other, why, s.previous_dir, (s.retire or [None])[0],
                      retire=[s.to_dir], detail={"undone": s.id})
        begin(self.versions, back)
        apply(self.versions, back, store, self.clock, self.log, notify=lambda _: self._signal())
        raise WorkerRefused(f"{why}; rolled back to {s.other} (see the worker's log)")

    def rollback_check(self, store, judged) -> str | None:
        lay = self.layout
        if not lay.previous.is_dir():
            return self._why(None, "no rollback: no previous version kept")
        live = version_of(lay.live)
        target = certified_target(lay.live, self.opts.target)
        d = drift(judged, live, target, self.opts.alarm_confidence, self.opts.sources)
        if not d["alarm"]:
            n = sum(r + w for r, w in badge_votes(judged, live, self.opts.sources)[0].values())
            return self._why(None, f"no rollback: the drift alarm is quiet for {live} ({n} judged badge votes)")
        return self.rollback(store, f"drift alarm: {d['why']}", d)

    def built_at(self, store, version: str, d: Path) -> float:
        ts = [e.ts for e in store.events() if e.event == "built" and e.version == version]
        return ts[-1] if ts else d.stat().st_mtime

    def score_challenger(self, store, judged) -> str | None:
        lay = self.layout
        waiting = lay.waiting()
        if not waiting:
            return self._why(None, "no challenger waiting")
        for stale in waiting[:-1]:  # a newer build supersedes an older one
            self._record(store, "refused", version_of(stale), other=version_of(lay.live),
                         reason="superseded by a newer candidate")
            self._retire(stale, version_of(stale))
        cand = waiting[-1]
        version, champion = version_of(cand), version_of(lay.live)
        since = self.built_at(store, version, cand)
        pairs = new_pairs(judged, since, champion, self.opts.sources)
        if conversations(pairs) < self.opts.min_new:  # wait for more
            return self._why(None, f"challenger {version} waits: {conversations(pairs)} of {self.opts.min_new} new "
                                   f"judged conversations of {champion}'s verdicts since it was built")
        if any(e.event == "rolled_back" and e.version == version for e in store.events()):
            gate = {"promote": False, "why": "this version was rolled back before"}
        else:
            from lab.nli.adapt import p_supports

            prem, hyp = [p.premise for p in pairs], [p.hypothesis for p in pairs]
            gate = challenger_gate(pairs, p_supports(lay.live, prem, hyp), p_supports(cand, prem, hyp),
                                   self.opts.min_new, self.opts.confidence)
        holds, cert = certificate_holds(cand)
        gate["certificate"] = cert
        self._record(store, "scored", version, other=champion, reason=gate["why"], detail=gate)
        why = gate["why"] if not gate["promote"] else f"its certificate does not hold: {cert}"
        if gate["promote"] and holds:
            try:
                return self.promote(store, cand, reason=f"challenger won: {gate['why']}; {cert}", detail=gate)
            except SwitchRefused as e:  # nothing moved: refused like a challenger that lost
                why = str(e)
        self._record(store, "refused", version, other=champion, reason=why, detail=gate)
        self._retire(cand, version)
        return None

    def maybe_build(self, store, judged) -> str | None:
        lay, now = self.layout, self.clock()
        if lay.waiting():
            return self._why(None, "no build: a challenger waits")
        attempts = [e.ts for e in store.events() if e.event in ("built", "not_built")]
        last = attempts[-1] if attempts else 0.0
        if now - last < self.opts.every_s:
            next_at = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(last + self.opts.every_s))
            return self._why(None, f"no build before {next_at} (one per {self.opts.every_s:.0f} s)")
        pairs = new_pairs(judged, last, None, self.opts.sources, scored_only=False)
        fresh = conversations(pairs)
        if fresh < self.opts.min_new:
            return self._why(None, f"no build: {fresh} new judged conversations ({len(pairs)} judged replies, as "
                                   f"adapt counts them), {self.opts.min_new} needed")
        return self.build(store, fresh)

    def build(self, store, fresh: int) -> str | None:
        lay = self.layout
        lay.candidates.mkdir(parents=True, exist_ok=True)
        work = lay.candidates / f".building-{int(self.clock() * 1000)}"
        champion = version_of(lay.live)
        env = dict(os.environ)
        if self.store_url:
            env["DIALCHECK_FEEDBACK_STORE"] = str(self.store_url)  # not on the command line: `ps` shows that
        cmd = [sys.executable, "-m", "dialcheck.cli", "adapt", "--from-feedback", "--base", str(lay.live),
               "--out", str(work), "--sources", ",".join(self.opts.sources), "--quiet", *self.opts.adapt_args]
        self.log(f"adapt-loop building a challenger of {champion} on {fresh} new judged conversations")
        t0 = time.monotonic()
        try:
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=self.opts.adapt_timeout_s)
            code, err = r.returncode, r.stderr
        except subprocess.TimeoutExpired:
            code, err = -1, f"dialcheck: adapt ran past {self.opts.adapt_timeout_s:.0f} s"
        seconds = round(time.monotonic() - t0, 1)
        if code == 0 and (work / "model.onnx").is_file():
            version = version_of(work)
            dest = lay.candidates / version
            if dest.exists():
                shutil.rmtree(dest)
            work.rename(dest)
            report = json.loads((dest / "adapt.json").read_text())
            self._record(store, "built", version, other=champion, reason=report.get("summary"),
                         detail={"seconds": seconds, "new_conversations": fresh, "pairs": report["data"].get("pairs"),
                                 "holdout": {k: report["holdout"][k].get("auc") for k in ("shipped", "adapted")},
                                 "certificate": (report.get("certificate") or {}).get("line")})
            return version
        lines = [ln for ln in err.splitlines() if ln.startswith("dialcheck:")]
        reason = (lines[-1] if lines else (err.strip().splitlines() or [f"exit {code}"])[-1])[:500]
        shutil.rmtree(work, ignore_errors=True)
        self._record(store, "not_built", champion, other=champion, reason=reason,
                     detail={"seconds": seconds, "exit": code, "new_conversations": fresh})
        return None

    def _why(self, result, reason: str):
        """Note why a step did nothing (the tick's line); `result` passed through."""
        self.reasons.append(reason)
        return result

    def tick(self) -> str:
        """One rollback check, challenger and build; the line that says why nothing else happened."""
        if not (self.layout.live / "model.onnx").is_file():
            raise LoopError(f"{self.layout.live}: no model.onnx (the live model directory; --model-dir)")
        self.reasons = []
        with self.locked(), self.open_store() as store:
            self.resume(store)
            judged = store.judged()
            if self.rollback_check(store, judged) is None and self.score_challenger(store, judged) is None:
                self.maybe_build(store, judged)
        return "adapt-loop: " + "; ".join(self.reasons) if self.reasons else ""

    def run(self, once: bool = False) -> None:
        """Tick every `check_every_s` (once with `once`), as the only loop on this model directory."""
        with self.only_loop():
            self._ticks(once)

    def _ticks(self, once: bool) -> None:
        from streams.feedback_store import StoreUnavailable

        said = ""
        while True:
            try:
                line = self.tick()
                if line and (once or line != said):  # a loop says a reason once, not every minute
                    self.log(line)
                said = line
            except StoreUnavailable as e:  # a PostgreSQL store restarting: the next tick tries again
                if once:
                    raise
                self.log(f"adapt-loop: {e}")
            if once:
                return
            time.sleep(self.opts.check_every_s)


@contextlib.contextmanager
def _flock(path: Path, wait: bool, busy: str = ""):
    """An exclusive flock on `path` for the block; `wait` False: LoopError(`busy`) when held."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            raise LoopError(busy or f"{path} is locked") from None
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def parse_duration(text: str) -> float:
    """'90', '90s', '30m', '6h', '1d' → seconds."""
    t = str(text).strip().lower()
    scale = {"s": 1, "m": 60, "h": 3600, "d": 86400}.get(t[-1:], None)
    number = t[:-1] if scale else t
    try:
        value = float(number) * (scale or 1)
    except ValueError:
        raise ValueError(f"{text!r} is not a duration (e.g. 90s, 30m, 6h)") from None
    if value < 0:
        raise ValueError(f"{text!r} is negative")
    return value


def split_args(text: str) -> tuple:
    return tuple(shlex.split(text or ""))
