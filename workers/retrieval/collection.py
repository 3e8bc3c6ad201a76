"""The passage collection: evidence texts from ../shared/data (DialFact evidence with titles,
FoolMeTwice Wikipedia sentences as distractors, optionally WiCE web pages) or a TSV of one's own
(id, title, text, optionally url). Long texts become 100-token passages with stride 50.

Source links: a passage's own URL where the source keeps one (DialFact evidence, a TSV's `url`
column), else the Wikipedia article of its title for the bundled Wikipedia sources (FoolMeTwice);
WiCE web pages get none (the data does not keep their address).

The starter knowledge base (`starter`, workers/retrieval/starter.py: English Wikipedia summaries of
the vital articles, CC BY-SA 4.0) is indexed by default beside the benchmark passages
(`default_sources`; DIALCHECK_STARTER_KB=0 leaves it out); each of its passages links its article."""
from __future__ import annotations

import csv
import hashlib
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping
from urllib.parse import quote

from ..jsonl import read_jsonl
from schemas.protocols import Passage

BENCHMARK_SOURCES = ("dialfact", "foolmetwice")
DEFAULT_SOURCES = BENCHMARK_SOURCES + ("starter",)  # with DIALCHECK_STARTER_KB on (the default)
ALL_SOURCES = ("dialfact", "foolmetwice", "wice", "starter")
WIKIPEDIA_SOURCES = frozenset({"dialfact", "foolmetwice", "starter"})  # titles are English Wikipedia article titles


def default_sources(settings) -> tuple[str, ...]:
    """The sources of the default index: the benchmark evidence, plus the starter base unless
    DIALCHECK_STARTER_KB=0."""
    return DEFAULT_SOURCES if settings.retrieval.starter_kb else BENCHMARK_SOURCES


def wikipedia_url(title: str) -> str:
    """The English Wikipedia article of a title: spaces → underscores, the rest percent-encoded
    (quotes and parentheses too, so the link survives HTML attributes and Markdown)."""
    return "https://en.wikipedia.org/wiki/" + quote(title.strip().replace(" ", "_"), safe="/,:")


def passage_id(title: str, text: str) -> str:
    return hashlib.sha1(f"{title}\x00{text}".encode()).hexdigest()[:16]


def chunk(title: str, text: str, size: int = 100, stride: int = 50, url: str | None = None) -> Iterator[Passage]:
    words = text.split()
    text = " ".join(words)
    if len(words) <= size:
        yield Passage(passage_id(title, text), title, text, doc_id=title, url=url)
        return
    for start in range(0, max(len(words) - size + stride, 1), stride):
        piece = " ".join(words[start:start + size])
        yield Passage(passage_id(title, piece), title, piece, doc_id=title, url=url)
        if start + size >= len(words):
            break




def dialfact_passages(data_dir: Path) -> Iterator[Passage]:
    for r in read_jsonl(data_dir / "dialfact" / "testsmall.jsonl"):
        for e in r.get("evidence_list", []):
            if len(e) >= 3 and str(e[2]).strip():
                own = str(e[1]).strip() if len(e) > 1 else ""  # DialFact keeps the article's URL
                yield from chunk(str(e[0]), str(e[2]), url=own if own.startswith(("https://", "http://"))
                                 else wikipedia_url(str(e[0])))


def foolmetwice_passages(data_dir: Path) -> Iterator[Passage]:
    for r in read_jsonl(data_dir / "foolmetwice" / "dev.jsonl"):
        for e in r.get("gold_evidence", []) + r.get("retrieved_evidence", []):
            if e.get("text", "").strip():
                yield from chunk(r["wikipedia_page"], e["text"], url=wikipedia_url(r["wikipedia_page"]))


def wice_passages(data_dir: Path) -> Iterator[Passage]:
    for r in read_jsonl(data_dir / "wice" / "dev.jsonl"):
        sents = [s for s in r["evidence"] if not s.startswith("(meta data)")]
        title = next((s[len("(meta data) TITLE: "):] for s in r["evidence"] if s.startswith("(meta data) TITLE:")),
                     r["meta"].get("claim_title", "web page"))
        yield from chunk(title, " ".join(sents))


def tsv_passages(path: Path) -> Iterator[Passage]:
    """Passages of one's own: columns id, title, text and optionally url (the source link verdicts
    show; blank for none); a header row starting with `id` is skipped."""
    with open(path, encoding="utf-8", newline="") as f:
        for row in csv.reader(f, delimiter="\t"):
            if len(row) < 3 or row[0] == "id":
                continue
            url = row[3].strip() if len(row) > 3 and row[3].strip() else None
            for p in chunk(row[1], row[2], url=url):
                yield p


_READERS = {"dialfact": dialfact_passages, "foolmetwice": foolmetwice_passages, "wice": wice_passages}


def build_collection(data_dir: str | Path, sources: Iterable[str] = DEFAULT_SOURCES,
                     tsv: str | Path | None = None,
                     readers: Mapping[str, Callable[[], Iterable[Passage]]] | None = None) -> list[Passage]:
    """Deduplicated passages from the chosen sources, in a stable order. `readers`: sources read
    elsewhere than data_dir (build.collect passes the starter base's, which imports this module)."""
    seen: set[str] = set()
    out: list[Passage] = []
    streams = [(readers or {})[s]() if s in (readers or {}) else _READERS[s](Path(data_dir)) for s in sources]
    if tsv:
        streams.append(tsv_passages(Path(tsv)))
    for stream in streams:
        for p in stream:
            if p.id not in seen:
                seen.add(p.id)
                out.append(p)
    if tsv and not any(True for _ in tsv_passages(Path(tsv))):
        raise ValueError(f"{tsv}: no passages in it (expected rows id<TAB>title<TAB>text)")
    return out
