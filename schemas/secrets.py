"""One scrubber for everything dialcheck itself writes: status reasons of verdicts and run rows,
error lines, log lines, `dialcheck config`. Never users' chat text.

Why here (the ground floor): the Pipeline (workers/), the stream worker and the ui (streams/) and the
CLI (dialcheck/) all write text that may quote a URL or an exception holding a credential; one
function below all of them means one rule, tested once.

What it masks:
- the WHOLE userinfo of any URL, configured or not: `scheme://user:p@ss:w rd@host` →
  `scheme://***@host`. The userinfo ends at the LAST `@` before the URL's path (`/ ? #`), a line
  end, a quote or the next `scheme://`, so passwords holding `@`, `:` or spaces are masked whole.
  It errs on the side of masking: "http://h:1 as bob@example.com" becomes "http://***@example.com".
- the literal values of the configured secrets (SASL password, the passwords inside every URL-like
  setting, raw and percent-decoded), wherever they appear in text dialcheck writes.

What it never touches: a verdict's claim, surface, evidence and rationale (users' text and passages).
A chat turn that happens to contain a secret value is published as written: rewriting it would change
users' data and confirm a guess.
"""
from __future__ import annotations

import dataclasses
import logging
import re
import urllib.parse
from typing import Any, Iterable

MASK = "***"
ELLIPSIS = "…"
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")
_MAX_SCHEME = 32
# the authority (userinfo@host:port) ends at the path, query or fragment, a line end, a quote or bracket
_AUTHORITY_END = re.compile(r"[/?#\r\n\"'<>`]")
_HOST_START = re.compile(r"[A-Za-z0-9\[]")
_MAX_USERINFO = 256  # a longer "userinfo" is not one; keeps the scan linear on hostile text
_MIN_SECRET = 4  # shorter configured values would mask ordinary words


def _scheme_start(text: str, sep: int) -> int:
    """Where the scheme ending at `sep` (the index of "://") starts, or -1 when there is none.
    A walk back, not a regex: a regex scheme search is quadratic on long runs of letters."""
    j = sep
    while j > max(0, sep - _MAX_SCHEME) and text[j - 1] in _SCHEME_CHARS:
        j -= 1
    while j < sep and not text[j].isalpha():  # a scheme starts with a letter (all of _SCHEME_CHARS are ASCII)
        j += 1
    return j if j < sep else -1


def mask_urls(text: str) -> str:
    """Every URL's whole userinfo → ***: `https://admin:p@ss word@os:9200/x` → `https://***@os:9200/x`.
    Linear in the text (log lines and reasons may be large and hostile)."""
    if "://" not in text or "@" not in text:
        return text
    out, pos, sep = [], 0, text.find("://")
    while sep >= 0:
        start = sep + 3
        if _scheme_start(text, sep) < 0:
            sep = text.find("://", start)
            continue
        limit = min(len(text), start + _MAX_USERINFO)
        end_m = _AUTHORITY_END.search(text, start, limit)
        end = end_m.start() if end_m else limit
        nxt = text.find("://", start, end)
        nxt_start = _scheme_start(text, nxt) if nxt >= 0 else -1
        if nxt_start >= 0:  # the next URL begins inside this one's span: stop at its scheme
            end = max(start, nxt_start)
        at = text.rfind("@", start, end)
        while at >= start and not _HOST_START.match(text, at + 1):
            at = text.rfind("@", start, at)
        if at >= start:
            out += [text[pos:start], MASK]
            pos = at  # the '@' and the host stay
        sep = text.find("://", start)
    out.append(text[pos:])
    return "".join(out)


def url_passwords(value: str) -> list[str]:
    """Passwords inside a URL-like setting (one URL, or a comma/semicolon list), raw and decoded."""
    found = []
    for part in re.split(r"[,;]", value):
        part = part.strip()
        if "@" not in part:
            continue
        try:
            pw = urllib.parse.urlsplit(part if "://" in part else "//" + part).password
        except ValueError:
            pw = None
        if pw is None:  # urlsplit gave up (e.g. a space in the host part): everything before the last '@'
            info = part.split("://", 1)[-1].rsplit("@", 1)[0]
            pw = info.split(":", 1)[1] if ":" in info else None
        if pw:
            found += [pw, urllib.parse.unquote(pw)]
    return found


def bound(text: str, max_bytes: int) -> str:
    """`text` cut to at most `max_bytes` UTF-8 bytes (on a character boundary, with "…" when cut)."""
    raw = text.encode("utf-8", "replace")
    if len(raw) <= max_bytes:
        return text
    keep = max_bytes - len(ELLIPSIS.encode())
    return raw[:keep].decode("utf-8", "ignore") + ELLIPSIS


class Scrubber:
    """Callable text → text without credentials (see the module doc). `Scrubber()` masks URL
    userinfo only; `Scrubber.from_settings(s)` also masks the configured secret values."""

    def __init__(self, secrets: Iterable[str] = ()):
        self.secrets = sorted({s for s in secrets if s and len(s) >= _MIN_SECRET}, key=len, reverse=True)

    @classmethod
    def from_settings(cls, settings: Any) -> "Scrubber":
        """Every SecretStr value and every password inside a string setting of every section
        (opensearch_url, kafka bootstrap, DIALCHECK_MODELS, and any URL-like setting added later)."""
        from pydantic import SecretStr

        secrets: list[str] = []
        for name in type(settings).model_fields:
            section = getattr(settings, name)
            for field in type(section).model_fields:
                value = getattr(section, field)
                if isinstance(value, SecretStr):
                    secrets.append(value.get_secret_value())
                elif isinstance(value, str):
                    secrets += url_passwords(value)
        return cls(secrets)

    def __call__(self, text: str) -> str:
        text = mask_urls(text)
        for s in self.secrets:
            if s in text:
                text = text.replace(s, MASK)
        return text

    def verdict(self, v: Any, max_reason_bytes: int | None = None) -> Any:
        """A Verdict as dialcheck publishes it: its status reason (and model_versions, which name
        backends) scrubbed and bounded; claim, surface, evidence and rationale untouched."""
        status = v.status
        if status.reason:
            reason = self(status.reason)
            status = dataclasses.replace(status, reason=bound(reason, max_reason_bytes) if max_reason_bytes else reason)
        versions = {k: self(x) if isinstance(x, str) else x for k, x in (v.model_versions or {}).items()}
        return dataclasses.replace(v, status=status, model_versions=versions)

    def row(self, row: dict) -> dict:
        """A run-file row (verdict dict or IR row): the same fields as `verdict`, plus IR `problems`."""
        out = dict(row)
        status = out.get("status")
        if isinstance(status, dict) and isinstance(status.get("reason"), str):
            out["status"] = {**status, "reason": self(status["reason"])}
        if isinstance(out.get("model_versions"), dict):
            out["model_versions"] = {k: self(x) if isinstance(x, str) else x for k, x in out["model_versions"].items()}
        if isinstance(out.get("problems"), list):
            out["problems"] = [[self(x) if isinstance(x, str) else x for x in p] if isinstance(p, (list, tuple)) else p
                               for p in out["problems"]]
        return out


class ScrubbingFilter(logging.Filter):
    """A log filter: every record's final message (arguments and traceback included) goes through
    the scrubber and is bounded. Installed on the root handlers by the worker and the CLI, so
    third-party lines (Faust, aiokafka, opensearch-py, urllib3) are covered too."""

    def __init__(self, scrub: Scrubber | None = None, max_bytes: int = 4096):
        super().__init__()
        self.scrub, self.max_bytes = scrub or Scrubber(), max_bytes

    def filter(self, record: logging.LogRecord) -> bool:
        scrub_record(record, self.scrub, self.max_bytes)
        return True


def scrub_record(record: logging.LogRecord, scrub, max_bytes: int) -> None:
    """Fold the record's message, arguments and traceback into one scrubbed, bounded message."""
    try:
        msg = record.getMessage()
        if record.exc_info:
            msg += "\n" + logging.Formatter().formatException(record.exc_info)
            record.exc_info, record.exc_text = None, None
    except Exception:  # noqa: BLE001 - a broken log call must not break the caller
        return
    record.msg, record.args = bound(scrub(msg), max_bytes), ()


def install_log_scrubber(scrub: Scrubber, max_bytes: int = 4096, logger: logging.Logger | None = None) -> None:
    """Add (or refresh) the scrubbing filter on every handler of `logger` (default: root)."""
    for h in (logger or logging.getLogger()).handlers:
        for f in [f for f in h.filters if isinstance(f, ScrubbingFilter)]:
            h.removeFilter(f)
        h.addFilter(ScrubbingFilter(scrub, max_bytes))


_factory_state: dict[str, Any] = {}


def install_record_scrubber(scrub: Scrubber, max_bytes: int = 16384) -> None:
    """Scrub every log record of this process when it is made (message, arguments, traceback), so
    every handler sees clean text: ours, Faust's, aiokafka's, opensearch-py's, Python's last resort.
    Called by the CLI at start; calling it again swaps the scrubber (no wrapper stacking)."""
    _factory_state["scrub"], _factory_state["max_bytes"] = scrub, max_bytes
    if "base" in _factory_state:
        return
    base = _factory_state["base"] = logging.getLogRecordFactory()

    def factory(*args, **kwargs) -> logging.LogRecord:
        record = base(*args, **kwargs)
        scrub = _factory_state.get("scrub")
        if scrub is not None:
            scrub_record(record, scrub, _factory_state.get("max_bytes", 16384))
        return record

    logging.setLogRecordFactory(factory)
