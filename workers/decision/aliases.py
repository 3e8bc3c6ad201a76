"""The other names a passage gives its subject: "New York City, often called the Big Apple",
"Mount Everest (known locally as Sagarmatha)", "Türkiye, officially the Republic of Türkiye",
"Lady Gaga (born Stefani Joanne Angelina Germanotta)".

Why: the subject check (components/subject.py) withdraws a SUPPORTS whose deciding windows never
name the claim's subject. A window of a passage about the subject may name it only by another name
the passage's opening gives; the knowledge base's own words are the alias list. Read from the
opening sentence only (where encyclopaedic and most product passages name their subject), with
regular expressions: a name-shaped phrase after "also / often / commonly ... known as / called",
"officially", "born", "nicknamed"."""
from __future__ import annotations

import re
from functools import lru_cache

_NAME = r"(?:the\s+)?[A-Z][\w'’.\-]*(?:\s+(?:of|de|la|von|van|the|and|[A-Z][\w'’.\-]*)){0,6}"
_CUES = re.compile(
    r"(?:(?:also|often|commonly|sometimes|formerly|better|locally|widely|popularly|originally)\s+)?"
    r"(?:known\s+(?:\w+\s+)?as|called|nicknamed|officially(?:\s+known\s+as)?|born|or\s+simply)\s+"
    rf"(?P<name>{_NAME})")
_OPENING = re.compile(r"(?<=[a-z0-9)\]])\.\s+(?=[A-Z])")  # the first sentence's end


@lru_cache(maxsize=65536)
def aliases(passage: str) -> tuple[str, ...]:
    """The names the passage's opening sentence gives beside its subject's, as written (a trailing
    "of" or "and" dropped); () when it gives none."""
    opening = _OPENING.split(passage.strip(), maxsplit=1)[0]
    found = []
    for m in _CUES.finditer(opening):
        name = re.sub(r"\s+(?:of|de|la|von|van|the|and)$", "", m.group("name").strip(" .,;"))
        if name and name not in found:
            found.append(name)
    return tuple(found)
