"""`dialcheck check`: claims in their dialogue context → verdicts, as text for people or as JSON.

Input: one claim from the arguments (`--claim`, `--context`, `--evidence`), a `--file` holding one
JSON object or JSON lines, or standard input (`dialcheck check -`, or a pipe when no --claim and no
--file: one claim per line, or JSON lines). However many claims, the models load once.

Text output says what an app would show (the verdict's `display`), the source with its link, and
why in one plain sentence; the numbers behind it (probabilities, the rule's thresholds, timings,
model versions) only with --verbose. `--format json` / `--json`: the verdict JSON as published, one
line per claim.
"""
from __future__ import annotations

import json
import sys
from functools import lru_cache
from typing import Iterable, Iterator, NamedTuple

from dialcheck.errors import UsageError

BATCH = 16  # claims per pipeline call from a file or a pipe (a terminal's stdin: one at a time)
TONE_MARK = {"supported": "✔", "disputed": "✘", "unverified": "?"}
PLACEHOLDER_TITLE = "evidence"  # the title given texts had before evidence objects ("" now): old verdicts
SKIP_KIND = {"question": "it is a question", "greeting": "it is a greeting", "thanks": "it thanks someone",
             "reaction": "it is a reaction", "personal": "it is about the speaker's own opinion or life"}


def register(sub) -> None:
    p = sub.add_parser("check", help="check claims in their dialogue context",
                       description="Check claims: from --claim, a --file (one JSON object, or JSON lines), "
                                   "or standard input ('-', or a pipe: one claim per line, or JSON lines). "
                                   "The models load once for all of them.")
    p.add_argument("source", nargs="?", choices=["-"], help="'-': read claims from standard input")
    p.add_argument("--file", help='JSON file: {"context": [...], "claim": "..."} or a DialFact record; '
                                  "or JSON lines, one such object a line")
    p.add_argument("--context", action="append", default=[], help="a context turn (repeatable, oldest first)")
    p.add_argument("--claim", help="the claim (response) to check")
    p.add_argument("--protocol", choices=["e2e", "fv"], default=None,
                   help="e2e: retrieve evidence from the passage index; fv: check against --evidence. Default: fv "
                        "when every claim gives its evidence (no index loaded), else e2e (a claim with evidence is "
                        "still checked against it)")
    p.add_argument("--evidence", action="append", default=[],
                   help="a passage to check against instead of retrieving (repeatable): its text, or a JSON object "
                        '{"text": ..., "title": ..., "url": ..., "id": ...} as a chat turn\'s evidence')
    p.add_argument("--surface", default=None,
                   help="the claim surface checked: r0 (as written) .. r4 (pronouns resolved), r4g (R1-R4 behind "
                        "the gate); default DIALCHECK_SURFACE (r0), as the stream")
    p.add_argument("--models", default=None,
                   help="'local' (in-process ONNX Runtime) or triton://HOST:PORT (default: DIALCHECK_MODELS)")
    p.add_argument("--format", choices=["text", "json"], default=None,
                   help="text: what an app would show, and why; json: the verdict as published "
                        "(schemas/verdict.schema.json), one line per claim. "
                        "Default: text on a terminal, json when piped (scripts keep getting JSON)")
    p.add_argument("--json", dest="format", action="store_const", const="json", help="same as --format json")
    p.add_argument("--server", default=None, metavar="URL",
                   help="ask a running `dialcheck serve-api` (e.g. http://127.0.0.1:8780) instead of loading the "
                        "models here; its protocol and surface apply")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="text: add the numbers (probabilities, the rule's thresholds, timings, model versions)")
    p.set_defaults(func=run)


# ---- input ----------------------------------------------------------------------------------
class Claim(NamedTuple):
    """One claim to check; `where` names the file and line for messages."""
    where: str
    context: list
    claim: str
    evidence: list | None  # GivenPassage (schemas/evidence.py) or DialFact (title, text) pairs; None: retrieve
    links: dict
    evidence_note: str | None = None  # what the evidence limits left unread


@lru_cache(maxsize=1)
def _evidence_limits():
    """How much given evidence is read (DIALCHECK_EVIDENCE_MAX_*), as the stream reads a turn's."""
    from schemas.evidence import EvidenceLimits
    from schemas.settings import load_settings

    return EvidenceLimits.of(load_settings().grounding)


def _given(raw, where: str) -> tuple[list | None, str | None]:
    """Evidence as a chat turn gives it (strings or objects, schemas/evidence.py) → passages and the
    limits' note; None: none given. A wrong shape is one line naming the claim and the passage."""
    from schemas.errors import InvalidEvent
    from schemas.evidence import parse_evidence

    if raw is None or raw == []:
        return None, None
    try:
        return parse_evidence(raw, _evidence_limits())
    except InvalidEvent as e:
        raise UsageError(f"{where}: {e.reason}") from None


def _evidence_arg(value: str):
    """One --evidence: a text, or a JSON object passage when it starts with '{'."""
    if not value.lstrip().startswith("{"):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as e:
        raise UsageError(f"--evidence {value[:40]!r}: not a JSON object ({e.msg}); give the passage's text, "
                         'or {"text": ..., "url": ...}') from None


def _from_object(obj, where: str) -> Claim:
    """{"claim", "context", "evidence"} or a DialFact record ("response", "evidence_list")."""
    if not isinstance(obj, dict):
        raise UsageError(f"{where}: expected a JSON object with 'context' and 'claim' (or a DialFact record)")
    context = obj.get("context", [])
    if isinstance(context, str):
        context = [context]
    if not isinstance(context, list) or not all(isinstance(c, str) for c in context):
        raise UsageError(f"{where}: 'context' must be a list of turns (strings), oldest first")
    claim = obj.get("claim") or obj.get("response")
    if not isinstance(claim, str) or not claim.strip():
        raise UsageError(f"{where}: no claim ('claim', or a DialFact record's 'response')")
    try:
        dialfact = [(str(e[0]), str(e[2])) for e in obj.get("evidence_list", []) if len(e) >= 3]
    except TypeError:
        raise UsageError(f"{where}: 'evidence_list' must hold DialFact's [title, url, text] triples") from None
    evidence, note = (dialfact, None) if dialfact else _given(obj.get("evidence"), where)
    return Claim(where, [c.strip() for c in context], claim.strip(), evidence, _links(obj), note)


def _links(obj) -> dict[str, str]:
    """title → url from a DialFact record's evidence_list ([title, url, text]): the text view's links
    for gold evidence, whose verdict evidence carries no url."""
    if not isinstance(obj, dict):
        return {}
    return {str(e[0]): str(e[1]) for e in obj.get("evidence_list", []) or []
            if isinstance(e, (list, tuple)) and len(e) >= 3 and str(e[1]).startswith(("http://", "https://"))}


def _json_line(line: str, where: str):
    try:
        return json.loads(line)
    except json.JSONDecodeError as e:
        raise UsageError(f"{where}: not valid JSON ({e.msg})") from None


def _read_file(path: str) -> list[Claim]:
    """One JSON object (the file may span lines), else JSON lines."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict):
        return [_from_object(whole, path)]
    if isinstance(whole, list):
        raise UsageError(f"{path}: a JSON array; give one JSON object, or JSON lines (one object a line)")
    out = [_from_object(_json_line(line, f"{path}:{n}"), f"{path}:{n}")
           for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not out:
        raise UsageError(f"{path}: no claim in the file (one JSON object, or JSON lines)")
    return out


def _stdin_claims(lines: Iterable[str], context: list[str], evidence: tuple) -> Iterator[Claim]:
    """A line starting with '{' is a JSON object; any other non-empty line is a claim (with the
    --context and --evidence given on the command line)."""
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        where = f"stdin:{n}"
        yield _from_object(_json_line(line, where), where) if line.startswith("{") else \
            Claim(where, list(context), line, evidence[0], {}, evidence[1])


def _stdin_is_a_pipe() -> bool:
    """Standard input is a pipe or a redirected file (not a terminal, not /dev/null, not closed):
    claims arrive there when none is named."""
    import os
    import stat

    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (AttributeError, ValueError, OSError):  # closed, or replaced by one without a descriptor
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode) or stat.S_ISSOCK(mode)


def _claims(args) -> tuple[Iterable[Claim], bool]:
    """The claims to check, and whether they arrive interactively (a terminal: one at a time)."""
    given = [("--claim", bool(args.claim)), ("--file", bool(args.file)), ("-", args.source == "-")]
    named = [n for n, on in given if on]
    if len(named) > 1:
        raise UsageError(f"give one of --claim, --file or '-' (stdin), not {' and '.join(named)}")
    evidence = _given([_evidence_arg(e) for e in args.evidence], "--evidence")
    if args.file:
        return _read_file(args.file), False
    if args.claim is not None:
        if not args.claim.strip():
            raise UsageError("the claim is empty (--claim TEXT)")
        return [Claim("--claim", list(args.context), args.claim.strip(), evidence[0], {}, evidence[1])], False
    if args.source == "-" or _stdin_is_a_pipe():
        if _isatty(sys.stdin):
            return _stdin_claims(sys.stdin, args.context, evidence), True
        try:
            claims = list(_stdin_claims(sys.stdin, args.context, evidence))
        except OSError as e:
            raise UsageError(f"cannot read standard input: {e}") from None
        if not claims:
            raise UsageError("no claim on standard input (one claim per line, or JSON lines)")
        return claims, False
    raise UsageError("no claim given (--claim TEXT, --file F, or claims on standard input: dialcheck check -)")


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def _batches(claims: Iterable[Claim], size: int) -> Iterator[list[Claim]]:
    batch: list[Claim] = []
    for c in claims:
        batch.append(c)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _require_evidence(claim: Claim, protocol: str | None) -> None:
    if protocol == "fv" and not claim.evidence:
        raise UsageError(f"{claim.where}: --protocol fv checks the claim against evidence you give: add --evidence TEXT "
                         "(or 'evidence' in the JSON), or use --protocol e2e to retrieve it")


def _protocol(args, claims, interactive: bool) -> str:
    """--protocol, else fv when every claim gives its evidence (no index needed), else e2e."""
    if args.protocol:
        return args.protocol
    return "fv" if not interactive and all(c.evidence for c in claims) else "e2e"


# ---- run ------------------------------------------------------------------------------------
def run(args) -> int:
    from schemas.items import CheckItem
    from schemas.settings import load_settings
    from dialcheck.wiring import check_surface, load_checker

    check_surface(args.surface)
    claims, interactive = _claims(args)
    if not interactive:  # every mistake in the input before the models load
        for c in claims:
            _require_evidence(c, args.protocol)
    if args.server:
        return _run_remote(args, claims, interactive)
    protocol = _protocol(args, claims, interactive)
    settings = load_settings(models={"backend": args.models})  # a bad setting or --models: before any data check
    if protocol != "fv" and not settings.grounding.only:  # no index and no data to build it from: one line
        from dialcheck.commands.data import require_index_sources

        require_index_sources(settings)
    fmt = args.format or ("text" if sys.stdout.isatty() else "json")
    with Status("loading models (NLI, encoder and spaCy: once for every claim)"):
        pipe = load_checker(settings, protocol=protocol, surface=args.surface)
    if pipe.load_report():
        print(pipe.load_report(), file=sys.stderr)
    n = 0
    for batch in _batches(claims, 1 if interactive else BATCH):
        for c in batch:
            _require_evidence(c, protocol)
        items = [CheckItem("cli", str(n + i + 1), c.context, c.claim, c.evidence, evidence_note=c.evidence_note)
                 for i, c in enumerate(batch)]
        with Status(f"checking {len(items)} claim(s)" if n or len(items) > 1 else "checking"):
            verdicts = [pipe.scrub.verdict(_turn_verdict(t)) for t in pipe.check_turns(items)]
        for c, v in zip(batch, verdicts):
            if fmt == "json":
                print(v.to_json().decode())
            else:
                print(("\n" if n else "") + format_text(_with_links(v, c.links), verbose=args.verbose))
            n += 1
        sys.stdout.flush()
    return 0


def _run_remote(args, claims, interactive: bool) -> int:
    """--server URL: each claim POSTed to /check (dialcheck/api.py), printed as a local check prints."""
    import requests

    from schemas.verdict import Verdict

    url = args.server.rstrip("/") + "/check"
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"--server {args.server}: expected http://HOST:PORT (a running `dialcheck serve-api`)")
    fmt = args.format or ("text" if sys.stdout.isatty() else "json")
    session = requests.Session()
    for n, (where, context, claim, evidence, links, _note) in enumerate(claims):
        body = {"claim": claim, "context": context, **({"evidence": _evidence_body(evidence)} if evidence else {})}
        try:
            r = session.post(url, json=body, timeout=(10, 600))
        except requests.RequestException as e:
            from dialcheck.commands.data import download_reason
            from dialcheck.errors import ServiceUnreachable

            raise ServiceUnreachable(f"no dialcheck api answers at {args.server}: {download_reason(e)} "
                                     "(start one with `dialcheck serve-api`)") from None
        if r.status_code != 200:
            try:
                message = r.json().get("error") or r.text[:200]
            except ValueError:
                message = r.text[:200]
            raise UsageError(f"{where}: the server refused the claim (HTTP {r.status_code}): {message}")
        v = Verdict.from_dict(r.json())
        if fmt == "json":
            print(v.to_json().decode())
        else:
            print(("\n" if n else "") + format_text(_with_links(v, links), verbose=args.verbose))
        sys.stdout.flush()
    return 0


def _evidence_body(evidence: list) -> list[dict]:
    """The claim's passages as a /check body gives them (DialFact pairs as titled objects)."""
    from schemas.evidence import evidence_json

    return [{"text": e[1], "title": e[0]} if isinstance(e, tuple) else evidence_json([e])[0] for e in evidence]


def _with_links(v, links: dict[str, str]):
    """The text view's copy of `v` with the input's links on gold evidence that has none."""
    if not links or all(e.url or e.title not in links for e in v.evidence):
        return v
    from dataclasses import replace

    return replace(v, evidence=[e if e.url or e.title not in links else replace(e, url=links[e.title])
                                for e in v.evidence])


def _turn_verdict(turn):
    """The turn's own verdict: a TurnResult's `.verdict` (or the last of a list of verdicts)."""
    return turn.verdict if hasattr(turn, "verdict") else turn[-1]


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


# ---- text -----------------------------------------------------------------------------------
def _short(text: str, n: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _numbers(numbers: dict) -> str:
    return ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in numbers.items())


def display_line(v) -> str:
    """`✔ supported (high confidence) — shown to users` / `? unverified — not shown`."""
    d = v.display
    if d is None:  # a verdict from before schema 2.1: the rule an app without a hint would apply
        from workers.display import display_for

        d = display_for(v.label, v.probabilities or {}, v.status)
    mark = TONE_MARK.get(d.tone, "?")
    if not d.show:
        return f"{mark} {d.tone} — not shown" if d.tone == "unverified" else \
            f"{mark} {d.tone} ({d.confidence} confidence) — not shown"
    return f"{mark} {d.tone} ({d.confidence} confidence) — shown to users"


def _untitled(title: str) -> bool:
    """A given passage without a title of its own (none given, or the old `--evidence TEXT` placeholder)."""
    return title in ("", PLACEHOLDER_TITLE)


def _passage(title: str) -> str:
    return "the evidence you gave" if _untitled(title) else f"the passage '{title}'"


def about_the_claim(v, window: dict, title: str) -> bool:
    """Does the passage the label rests on name the claim's subject (workers/decision/sufficiency.py
    `subject_covered`: its names and numbers, half its key terms)? Why: a standalone claim can be
    decided SUPPORTS from a passage about something else ("Albert Einstein was born in France." from
    the Albert Camus passage), and "why" must not credit that passage with stating it."""
    from workers.decision.sufficiency import subject_covered

    deciding = next((e for e in v.evidence if e.passage_id == window.get("passage_id")), None)
    text = (deciding.window or deciding.text) if deciding is not None else window.get("text", "")
    topic = v.surface.text if v.surface is not None and v.surface.text else v.claim
    return subject_covered(topic, text or "", "" if _untitled(title) else title)


def plain_why(v) -> list[str]:
    """Why, in plain words (no rule or threshold names): one sentence, then what the evidence
    does not mention and whether it was only loosely on topic."""
    r = v.rationale or {}
    rule = r.get("rule", "")
    window = r.get("window") or {}
    title = window.get("title") or (v.evidence[0].title if v.evidence else "")
    if v.status.state == "error" or rule == "error":
        return ["Nothing was decided: a service the check needs did not answer."]
    if rule == "not-check-worthy":
        kind = (r.get("summary") or "").split(": ", 1)[-1].split(" — ", 1)[0].strip()
        return [f"Not checked: {SKIP_KIND[kind]}, not a statement of fact." if kind in SKIP_KIND
                else "Not checked: the turn states no fact to check."]
    if rule == "turn-summary":
        k = (r.get("numbers") or {}).get("claims", 0)
        grounded = "NOT ENOUGH INFO > SUPPORTS" in (r.get("summary") or "")  # attribution: all must be backed
        what = {"REFUTES": "one of them is disputed",
                "SUPPORTS": "every one is backed by the evidence" if grounded else
                            "none is disputed and at least one is supported",
                "NOT ENOUGH INFO": "not every one is backed by the evidence" if grounded else
                                   "none of them could be confirmed"}.get(v.label, "")
        return [f"This turn makes {k} claims; {what}." if what else f"This turn makes {k} claims."]
    if rule == "no-evidence" or not v.evidence:
        return ["No passage was found to check this against."]
    many = (r.get("numbers") or {}).get("windows_read", len(v.evidence)) != 1
    source = _passage(title)
    source = source[:1].upper() + source[1:]
    why = {"SUPPORTS": f"{source} states this.", "REFUTES": f"{source} says otherwise.",
           }.get(v.label, "The passages found do not say this." if many else "The passage found does not say this.")
    if v.label == "SUPPORTS" and not about_the_claim(v, window, title):
        why = (f"{source} reads as agreeing, but it does not name what the claim is about, so it does not "
               "confirm it.")
    lines = [why]
    if v.uncovered:
        lines.append(f"The evidence does not mention: {', '.join(v.uncovered)}.")
    if v.status.evidence == "weak":
        lines.append("The passages found are only loosely about this claim.")
    if v.status.state == "degraded":
        lines.append("The check was incomplete (a service was slow or down), so this may change.")
    return lines


def _words(text: str) -> str:
    from workers.windows import normalise

    return " ".join(normalise(text))


def fold_evidence(evidence: list) -> list[tuple[object, int, str | None]]:
    """(evidence, how many near-duplicates it stands for, the group's first link), in order: a
    later one is folded into an earlier when both read the same words after normalisation
    (workers/windows.py `normalise`) or one's words are contained in the other's. The earlier one
    stays (the list is ranked: the deciding window first)."""
    kept: list[list] = []  # [evidence, words, folded, url]
    for e in evidence:
        w = _words(e.window or e.text)
        for k in kept:
            if w == k[1] or (w and k[1] and (f" {w} " in f" {k[1]} " or f" {k[1]} " in f" {w} ")):
                k[2] += 1
                k[3] = k[3] or getattr(e, "url", None)
                break
        else:
            kept.append([e, w, 0, getattr(e, "url", None)])
    return [(e, folded, url) for e, _, folded, url in kept]


def _link(e, url: str | None = None) -> str:
    url = url or getattr(e, "url", None)
    title = "the evidence you gave" if _untitled(e.title) else e.title
    return f"{title} — {url}" if url else title


def format_text(v, verbose: bool = False) -> str:
    """A verdict for people: what an app shows, the claim, the source, why, the evidence (near
    duplicates folded); with `verbose`, the numbers engineers read as well."""
    lines = [display_line(v), f"claim:     {_short(v.claim)}"]
    s = v.surface
    if s.text != v.claim:
        lines.append(f"checked:   {_short(s.text)}")
    window = (v.rationale or {}).get("window") or {}
    folded = fold_evidence(v.evidence)
    deciding = next(((e, url) for e, _, url in folded if e.passage_id == window.get("passage_id")), None)
    if v.label in ("SUPPORTS", "REFUTES") and (deciding or window):
        lines.append(f"source:    {_link(*deciding) if deciding else _passage(window.get('title', ''))}")
    why = plain_why(v)
    lines.append(f"why:       {why[0]}")
    lines += [f"           {w}" for w in why[1:]]
    if folded:
        lines.append("evidence:")
        for i, (e, dup, url) in enumerate(folded, 1):
            more = f"   (+{dup} near-duplicate{'s' if dup > 1 else ''})" if dup else ""
            lines.append(f"  {i}. {_link(e, url)}{more}")
            lines.append(f"     {_short(e.window or e.text, 140)}")
    if v.status.state != "ok" and v.status.reason:
        lines.append(f"status:    {v.status.state}: {_short(v.status.reason)}")
    if verbose:
        lines += _engineer_lines(v)
    return "\n".join(lines)


def _engineer_lines(v) -> list[str]:
    """--verbose: probabilities, status, the rule and its numbers, the gate, each evidence's NLI
    scores, timings and model versions."""
    from schemas import TIMING_META_KEYS

    p = v.probabilities or {}
    probs = " · ".join(f"{short} {p.get(label, 0.0):.2f}" for label, short in
                       (("SUPPORTS", "S"), ("REFUTES", "R"), ("NOT ENOUGH INFO", "NEI")))
    d = v.display
    lines = ["--- detail", f"label:     {v.label}   ({probs})",
             f"status:    {v.status.state}" + (f": {v.status.reason}" if v.status.reason else "")
             + f"   evidence {v.status.evidence or 'none'}"
             + (f"   display show={d.show} confidence={d.confidence}" if d else "")]
    s = v.surface
    checked = f"surface:   [{s.name}] {_short(s.text)}"
    if s.gate is not None:
        g = s.gate
        checked += (f"   (gate {g.score:.2f} {'≥' if g.accepted else '<'} τ {g.threshold:.2f}: "
                    f"{s.candidate or 'rewrite'} {'used' if g.accepted else 'rejected'}: {_short(s.candidate_text or '', 80)})")
    lines.append(checked)
    r = v.rationale or None
    if r:
        lines.append(f"rule:      {r.get('rule', '')}" + (f"   [{_numbers(r['numbers'])}]" if r.get("numbers") else ""))
        lines.append(f"rationale: {r.get('summary', '')}")
        w = r.get("window") or None
        if w:
            lines.append(f"read:      {w.get('title', '')}: {_short(w.get('text', ''))}")
    else:
        lines.append("rationale: (this verdict carries no rationale)")
    if v.uncovered is not None:
        lines.append(f"uncovered: {', '.join(v.uncovered) or '(none)'}")
    for i, e in enumerate(v.evidence, 1):
        lines.append(f"  e{i}. {e.title} [{e.passage_id}]   entail {e.entail:.2f}, neutral {e.neutral:.2f}, "
                     f"contradict {e.contradict:.2f}" + (f", prescore {e.prescore:.2f}" if e.prescore is not None else "")
                     + (f", retrieval {e.retrieval_score:.3g}" if e.retrieval_score is not None else ""))
    stages = {k: ms for k, ms in (v.timings_ms or {}).items() if k not in TIMING_META_KEYS}
    if stages:
        shared = (v.timings_ms or {}).get("batch_items")  # a count, not milliseconds (schemas.TIMING_META_KEYS)
        lines.append("timings:   " + ", ".join(f"{k} {ms:.0f} ms" for k, ms in stages.items())
                     + (f"   (batched stages: this claim's share of {shared:g} claims)" if shared else ""))
    if v.model_versions:
        lines.append("models:    " + ", ".join(f"{k} {val}" for k, val in v.model_versions.items()))
    return lines
