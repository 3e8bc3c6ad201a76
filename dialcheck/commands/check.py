"""`dialcheck check`: one dialogue (JSON file or arguments) → a verdict, as readable text or as JSON."""
from __future__ import annotations

import json
import sys

from dialcheck.errors import UsageError


def register(sub) -> None:
    p = sub.add_parser("check", help="check one claim in its dialogue context")
    p.add_argument("--file", help='JSON file: {"context": [...], "claim": "..."} or a DialFact record')
    p.add_argument("--context", action="append", default=[], help="a context turn (repeatable, oldest first)")
    p.add_argument("--claim", help="the claim (response) to check")
    p.add_argument("--protocol", choices=["e2e", "fv"], default="e2e")
    p.add_argument("--evidence", action="append", default=[], help="gold evidence text (protocol fv)")
    p.add_argument("--surface", default="r4g")
    p.add_argument("--models", default=None)
    p.add_argument("--format", choices=["text", "json"], default=None,
                   help="text: a readable explanation; json: the verdict as published (schemas/verdict.schema.json). "
                        "Default: text on a terminal, json when piped (scripts keep getting JSON)")
    p.set_defaults(func=run)


def _read_file(path: str) -> tuple[list[str], str | None, list[tuple[str, str]]]:
    try:
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
    except json.JSONDecodeError as e:
        raise UsageError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
    if not isinstance(obj, dict):
        raise UsageError(f"{path}: expected a JSON object with 'context' and 'claim' (or a DialFact record)")
    context = obj.get("context", [])
    claim = obj.get("claim") or obj.get("response")
    evidence = [(e[0], e[2]) for e in obj.get("evidence_list", [])] or [("evidence", e) for e in obj.get("evidence", [])]
    return context, claim, evidence


def run(args) -> int:
    from schemas.items import CheckItem
    from schemas.settings import load_settings
    from workers.pipeline import SURFACES, Pipeline

    if args.file:
        context, claim, evidence = _read_file(args.file)
    else:
        context, claim, evidence = args.context, args.claim, [("evidence", e) for e in args.evidence]
    if not claim:
        raise UsageError("no claim given (--claim TEXT or --file F)")
    if args.surface not in SURFACES:
        raise UsageError(f"unknown --surface {args.surface}: choose from {','.join(SURFACES)}")
    if args.protocol == "fv" and not evidence:
        raise UsageError("--protocol fv checks the claim against evidence you give: add --evidence TEXT "
                         "(or a --file with 'evidence'), or use --protocol e2e to retrieve it")
    if args.protocol != "fv":  # no index yet and no data to build it from: one line naming `dialcheck data fetch`
        from dialcheck.commands.data import require_index_sources

        require_index_sources(load_settings())
    with Status("loading models and checking (the first check of a process loads NLI, encoder and spaCy)"):
        pipe = Pipeline.from_settings(load_settings(models={"backend": args.models}), protocol=args.protocol,
                                      surface=args.surface)
        item = CheckItem("cli", "1", list(context), claim, evidence if args.protocol == "fv" else None)
        verdict = pipe.check_many([item])[0]
    fmt = args.format or ("text" if sys.stdout.isatty() else "json")
    print(verdict.to_json().decode() if fmt == "json" else format_text(verdict))
    if pipe.load_report():
        print(pipe.load_report(), file=sys.stderr)
    return 0


class Status:
    """A one-line status with elapsed seconds on stderr while the block runs, on a terminal only
    (stdout stays the verdict alone; a pipe or log file gets nothing). Why: a first check is silent
    for ~20 s while models load."""

    def __init__(self, text: str, stream=None):
        self.text, self.stream = text, stream or sys.stderr
        self.on = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._stop = None

    def _run(self) -> None:
        import time

        t0 = time.monotonic()
        while not self._stop.wait(0.5):
            self.stream.write(f"\r{self.text} ... {time.monotonic() - t0:.0f} s")
            self.stream.flush()

    def __enter__(self) -> "Status":
        if self.on:
            import threading

            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._stop is not None:
            self._stop.set()
            self._thread.join()
            self.stream.write("\r\033[K")  # clear the line: the verdict follows on stdout
            self.stream.flush()


def _short(text: str, n: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _numbers(numbers: dict) -> str:
    return ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in numbers.items())


def format_text(v) -> str:
    """A verdict for people: label and probabilities, what was checked, why, the evidence, status."""
    from schemas import TIMING_META_KEYS

    p = v.probabilities or {}
    probs = " · ".join(f"{short} {p.get(label, 0.0):.2f}" for label, short in
                       (("SUPPORTS", "S"), ("REFUTES", "R"), ("NOT ENOUGH INFO", "NEI")))
    lines = [f"{v.label}   ({probs})   status {v.status.state}" + (f": {v.status.reason}" if v.status.reason else ""),
             f"claim:     {_short(v.claim)}"]
    s = v.surface
    if s.text != v.claim or s.gate is not None:
        checked = f"checked:   [{s.name}] {_short(s.text)}"
        if s.gate is not None:
            g = s.gate
            checked += (f"   (gate {g.score:.2f} {'≥' if g.accepted else '<'} τ {g.threshold:.2f}: "
                        f"{'rewrite used' if g.accepted else 'rewrite rejected'})")
        lines.append(checked)
    r = v.rationale or None
    if r:
        why = r.get("summary") or r.get("rule", "")
        if r.get("numbers"):
            why += f"   [{r.get('rule', '')}: {_numbers(r['numbers'])}]"
        lines.append(f"why:       {why}")
        w = r.get("window") or None
        if w:
            lines.append(f"read:      {w.get('title', '')}: {_short(w.get('text', ''))}")
    else:
        lines.append("why:       (this verdict carries no rationale)")
    if v.evidence:
        lines.append("evidence:")
        for i, e in enumerate(v.evidence, 1):
            lines.append(f"  {i}. {e.title} — {_short(e.window or e.text, 140)}"
                         f"   (entail {e.entail:.2f}, contradict {e.contradict:.2f})")
    else:
        lines.append("evidence:  none")
    stages = {k: ms for k, ms in (v.timings_ms or {}).items() if k not in TIMING_META_KEYS}
    if stages:
        shared = (v.timings_ms or {}).get("batch_items")  # a count, not milliseconds (schemas.TIMING_META_KEYS)
        lines.append("timings:   " + ", ".join(f"{k} {ms:.0f} ms" for k, ms in stages.items())
                     + (f"   (batched stages: this claim's share of {shared:g} claims)" if shared else ""))
    return "\n".join(lines)
