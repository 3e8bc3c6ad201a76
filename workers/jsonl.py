"""Reading and writing JSON Lines files (every data set in ../shared/data is one, and so is a run file).

The one JSONL reader and writer of the runtime and the lab (schemas/items.py keeps its own line-numbered
reader: schemas may not import workers). Both close their files; blank lines are skipped on reading."""
from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Iterable, Iterator


def read_jsonl(source: str | Path | IO[str]) -> Iterator[dict]:
    """One object per non-blank line of a file path (opened as UTF-8 and closed when the iteration
    ends), or of an open text stream (a zip member wrapped in io.TextIOWrapper; left to its owner)."""
    if isinstance(source, (str, Path)):
        with open(source, encoding="utf-8") as f:
            yield from _objects(f)
    else:
        yield from _objects(source)


def _objects(lines: Iterable[str]) -> Iterator[dict]:
    for line in lines:
        line = line.strip()
        if line:
            yield json.loads(line)


def write_jsonl(path: str | Path, rows: Iterable[dict]) -> int:
    """One object per line (UTF-8, not ASCII-escaped); returns the number of rows written."""
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    return n
