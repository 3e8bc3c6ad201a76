"""Placeholders that shield spans no rewrite may touch (URLs, dotted acronyms, honorifics)."""
from __future__ import annotations

import re

_PROTECTED = re.compile(
    r"(?:https?://|www\.)\S+"                       # URLs
    r"|\b(?:[A-Za-z]\.){2,}"                         # dotted acronyms: U.S., Ph.D., e.g.
    r"|\b(?:Mr|Mrs|Ms|Dr|Prof|Sr|Jr|St|Mt|vs|etc)\.",  # honorifics and common abbreviations
)


def protect(text: str) -> tuple[str, list[str]]:
    saved: list[str] = []

    def keep(m: re.Match) -> str:
        saved.append(m.group(0))
        return f"\uE000{len(saved) - 1}\uE001"

    return _PROTECTED.sub(keep, text), saved


def restore(text: str, saved: list[str]) -> str:
    return re.sub("\uE000(\\d+)\uE001", lambda m: saved[int(m.group(1))], text)
