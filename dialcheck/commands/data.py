"""`dialcheck data fetch | list | convert`: the data files dialcheck reads, from their public sources;
`convert` writes the chat-response attribution sets (BEGIN dev, FaithDial) as DialFact-format JSONL
(lab/evaluation/dialfact_format.py), for `eval`, `replay` and `demo` with `--protocol fv`.

Why a manifest (dialcheck/data_manifest.json): every file has one source URL at a fixed commit, a
sha256 and a size, so a fetch is reproducible and a changed or truncated file is refused instead
of read. A download goes to a temp file in the target directory, is checked, then renamed into
place (atomic on one file system): a failed or refused fetch leaves nothing half-written.

Also here: `require(...)`, what the commands call before they open a data file, and
`missing_data(error, settings)`, how dialcheck/errors.py tells a missing data file (one line naming
`dialcheck data fetch <set>`) from any other missing file.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from schemas import DataMissing
from schemas.errors import DialcheckError

MANIFEST = Path(__file__).resolve().parent.parent / "data_manifest.json"
BASE_URL_ENV = "DIALCHECK_DATA_BASE_URL"
# the passage-index sources (workers/retrieval/collection.py) and the file each reads
SOURCE_FILES = {"dialfact": "dialfact/testsmall.jsonl", "foolmetwice": "foolmetwice/dev.jsonl",
                "wice": "wice/dev.jsonl"}
CHUNK = 1 << 16


class DataError(DialcheckError):
    """A data mistake the user can fix (unknown set, refused download, source unreachable); the
    message is the one line dialcheck/errors.py prints, exit 2. Not dialcheck.errors.UsageError:
    errors.py imports this module, so this one imports nothing of it."""
    exit_code = 2


@dataclass(frozen=True)
class Manifest:
    sets: dict[str, dict[str, Any]]
    files: list[dict[str, Any]]
    path: Path

    @classmethod
    def load(cls, path: str | Path | None = None) -> "Manifest":
        p = Path(path) if path else MANIFEST
        try:
            raw = json.loads(p.read_text())
            return cls(raw["sets"], raw["files"], p)
        except FileNotFoundError:
            raise DataError(f"no such manifest: {p} (--manifest)") from None
        except (ValueError, KeyError, TypeError) as e:
            raise DataError(f"unreadable data manifest {p}: {type(e).__name__}: {str(e)[:120]}") from None

    def set_of(self, relpath: str) -> str | None:
        for f in self.files:
            if f["path"] == relpath:
                return f["set"]
        return None

    def title(self, name: str) -> str:
        return self.sets.get(name, {}).get("title", name)

    def files_of(self, names: Iterable[str]) -> list[dict[str, Any]]:
        names = set(names)
        return [f for f in self.files if f["set"] in names]


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def file_state(root: Path, entry: dict[str, Any]) -> str:
    """'present', 'missing' or 'corrupt' (size or sha256 differ from the manifest)."""
    p = root / entry["path"]
    if not p.is_file():
        return "missing"
    if p.stat().st_size != entry["size"] or sha256_of(p) != entry["sha256"]:
        return "corrupt"
    return "present"


# --- what commands call before they open data -------------------------------------------------

def _missing(settings, relpath: str, manifest: Manifest | None = None) -> DataMissing:
    m = manifest or Manifest.load()
    name = m.set_of(relpath) or relpath.split("/", 1)[0]
    return DataMissing(name, m.title(name), str(Path(settings.data.dir) / relpath), settings.data.looked_in())


def require(settings, *relpaths: str) -> None:
    """DataMissing for the first of these data files (relative to the data dir) that is absent."""
    for rel in relpaths:
        if not (Path(settings.data.dir) / rel).is_file():
            raise _missing(settings, rel)


def require_index_sources(settings, sources: Iterable[str] | None = None) -> None:
    """Before `ensure_index`: when the embedded index is not built yet, the source files it will be
    built from must be there (a minutes-long build should not start and then miss a file)."""
    if settings.retrieval.backend != "embedded" or (Path(settings.retrieval.index_dir) / "meta.json").exists():
        return
    if sources is None:
        from workers.retrieval.collection import DEFAULT_SOURCES

        sources = DEFAULT_SOURCES
    require(settings, *(SOURCE_FILES[s] for s in sources if s in SOURCE_FILES))


def ensure_data(settings, relpaths: Iterable[str], who: str = "dialcheck", out=None,
                manifest: Manifest | None = None) -> None:
    """Fetch the sets these data files belong to when any is missing: one line saying what and from
    where, a byte bar on a terminal, then back to the caller (`dialcheck demo` runs as written on a
    fresh machine). Offline, the fetch's one line names DIALCHECK_DATA_BASE_URL. When the data dir
    read is not the fetch dir (../shared/data exists but lacks the file) or a set cannot be fetched,
    the DataMissing line as before: a fetch there would not be read."""
    from tqdm import tqdm

    out = out or sys.stderr
    root = Path(settings.data.dir)
    missing = [rel for rel in relpaths if not (root / rel).is_file()]
    if not missing:
        return
    manifest = manifest or Manifest.load()
    names = list(dict.fromkeys(manifest.set_of(rel) or rel.split("/", 1)[0] for rel in missing))
    if root != settings.data.fetch_dir or any(n not in manifest.sets or manifest.sets[n].get("not_fetchable")
                                              for n in names):
        raise _missing(settings, missing[0], manifest)
    base_url = os.environ.get(BASE_URL_ENV) or None
    todo = [e for e in manifest.files_of(names) if file_state(root, e) != "present"]
    size = sum(e["size"] for e in todo)
    hosts = sorted({(source_url(e, base_url) or "").split("/")[2] for e in todo if "//" in (source_url(e, base_url) or "")})
    source = base_url or ", ".join(hosts)
    titles = " and ".join(manifest.title(n) for n in names)
    line = (f"{who}: {titles} data not found; fetching {len(todo)} files ({size / 1e6:.1f} MB) from {source} "
            f"into {root} (once; {BASE_URL_ENV} for a mirror)")
    bar = None

    def progress(n: int) -> None:  # the line and the bar once bytes arrive: offline, the error line alone
        nonlocal bar
        if bar is None:
            print(line, file=out, flush=True)
            bar = tqdm(total=size, unit="B", unit_scale=True, desc="data", file=out, disable=None, leave=False,
                       dynamic_ncols=True)
        bar.update(n)

    try:
        with open(os.devnull, "w") as quiet:
            fetch(manifest, names, root, base_url, out=quiet, progress=progress)
    finally:
        if bar is not None:
            bar.close()


def missing_data(error: BaseException, settings) -> DataMissing | None:
    """A FileNotFoundError for a file inside the data dir, as the one DataMissing line."""
    if isinstance(error, DataMissing):
        return error
    name = getattr(error, "filename", None)
    if not isinstance(error, FileNotFoundError) or not isinstance(name, (str, os.PathLike)):
        return None
    try:
        rel = Path(os.path.abspath(name)).relative_to(os.path.abspath(settings.data.dir))
    except ValueError:
        return None
    return _missing(settings, rel.as_posix())


# --- fetch -----------------------------------------------------------------------------------

class ChecksumMismatch(DataError):
    """A downloaded file whose sha256 or size is not the manifest's (refused, nothing kept)."""

    def __init__(self, name: str, why: str):
        super().__init__(f"refused {name}: {why}; nothing written (a changed upstream file or a wrong --base-url)")


def download(url: str, target: Path, sha256: str, size: int, timeout_s: float = 30.0,
             progress: Callable[[int], object] | None = None, name: str = "") -> None:
    """url → target, verified; a temp file beside the target, renamed into place only when it matches.
    `progress(n)` is called with each block's size (a byte bar); `name` is the file in a refusal
    (the manifest's path; the target's name when not given)."""
    import requests

    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        h, n = hashlib.sha256(), 0
        with os.fdopen(fd, "wb") as out:
            with requests.get(url, stream=True, timeout=(10, timeout_s)) as r:
                r.raise_for_status()
                for block in r.iter_content(CHUNK):
                    n += len(block)
                    if n > size:  # never write more than the manifest says the file holds
                        raise ChecksumMismatch(name or target.name, f"{url} is larger than the {size} bytes the manifest gives")
                    h.update(block)
                    out.write(block)
                    if progress is not None:
                        progress(len(block))
        if n != size or h.hexdigest() != sha256:
            raise ChecksumMismatch(name or target.name, f"{url}: sha256 {h.hexdigest()[:12]}… ({n} bytes) is not the manifest's "
                                   f"{sha256[:12]}… ({size} bytes)")
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def download_reason(e: Exception) -> str:
    """Why a download failed, whole and short: requests' own text nests urllib3's pool repr, which
    runs to 400 characters and was cut mid-sentence."""
    import requests

    if isinstance(e, requests.HTTPError) and e.response is not None:
        return f"HTTP {e.response.status_code} {e.response.reason or ''}".strip()
    if isinstance(e, requests.Timeout):
        return "the server did not answer in time"
    if isinstance(e, requests.ConnectionError):
        text = str(e)
        host = getattr(getattr(e, "request", None), "url", "") or ""
        from urllib.parse import urlsplit

        host = urlsplit(host).hostname or "the host"
        if "NameResolution" in text or "Name or service not known" in text or "Temporary failure in name" in text:
            return f"{host} could not be resolved (no network or DNS)"
        if "Connection refused" in text:
            return f"{host} refused the connection"
        return f"cannot connect to {host}"
    return type(e).__name__


def source_url(entry: dict[str, Any], base_url: str | None) -> str | None:
    """The file's manifest URL, or `<base-url>/<path in the data dir>` (a mirror, a test server)."""
    if base_url:
        return f"{base_url.rstrip('/')}/{entry['path']}"
    return entry.get("url")


def fetch(manifest: Manifest, names: list[str], root: Path, base_url: str | None = None,
          force: bool = False, out=None, progress: Callable[[int], object] | None = None) -> dict[str, int]:
    import requests

    out = out or sys.stdout
    counts = {"fetched": 0, "present": 0}
    for entry in manifest.files_of(names):
        target = root / entry["path"]
        if not force and file_state(root, entry) == "present":
            counts["present"] += 1
            print(f"present  {entry['path']}", file=out, flush=True)
            continue
        url = source_url(entry, base_url)
        try:
            download(url, target, entry["sha256"], entry["size"], progress=progress, name=entry["path"])
        except requests.RequestException as e:
            layout = f"<base>/{entry['path']}, the data dir's layout"
            hint = (f"check the mirror (--base-url / {BASE_URL_ENV}): it must serve {layout}" if base_url else
                    f"offline? set {BASE_URL_ENV} to a mirror that serves {layout}")
            raise DataError(f"could not download {entry['path']} from {url}: {download_reason(e)}; {hint}; "
                            f"or copy the files into {root}") from None
        counts["fetched"] += 1
        print(f"fetched  {entry['path']} ({entry['size']} bytes, sha256 ok)", file=out, flush=True)
    return counts


# --- the command -----------------------------------------------------------------------------

def register(sub) -> None:
    p = sub.add_parser("data", help="fetch and list the data files (DialFact, FoolMeTwice, WiCE, ...)")
    dsub = p.add_subparsers(dest="data_command", required=True)
    f = dsub.add_parser("fetch", help="download data sets from their public sources, verified by sha256")
    f.add_argument("sets", nargs="*", help="set names (default: every fetchable set; `dialcheck data list` names them)")
    f.add_argument("--dir", default=None, help="target data dir (default: DIALCHECK_DATA_DIR when set, else "
                                               "DIALCHECK_DATA_HOME or ~/.local/share/dialcheck/data)")
    f.add_argument("--base-url", default=None, help=f"download from BASE/<path> instead of each file's URL "
                                                    f"(a mirror; default: {BASE_URL_ENV})")
    f.add_argument("--force", action="store_true", help="download again even when a file is present and verified")
    f.add_argument("--manifest", default=None, help="another manifest (default: dialcheck/data_manifest.json)")
    f.set_defaults(func=cmd_fetch)
    ls = dsub.add_parser("list", help="each set: present / missing / corrupt, and where")
    ls.add_argument("--dir", default=None, help="data dir to inspect (default: the one commands read)")
    ls.add_argument("--json", action="store_true", help="print the report as JSON")
    ls.add_argument("--manifest", default=None, help=argparse_suppress())
    ls.set_defaults(func=cmd_list)
    c = dsub.add_parser("convert", help="write BEGIN dev or FaithDial's audit as DialFact-format JSONL "
                                        "(knowledge → evidence; for eval / replay / demo --protocol fv)")
    c.add_argument("set", choices=("begin", "faithdial"), help="begin: BEGIN dev's three corpora; faithdial: its audit")
    c.add_argument("--out", required=True, help="the JSONL file to write (never commit it: the sets' licences)")
    c.add_argument("--limit", type=int, default=None, help="N records spread evenly over the set (default: all)")
    c.set_defaults(func=cmd_convert)


def argparse_suppress() -> str:
    import argparse

    return argparse.SUPPRESS


def _chosen(manifest: Manifest, names: list[str]) -> list[str]:
    unknown = [n for n in names if n not in manifest.sets]
    if unknown:
        raise DataError(f"unknown data set {unknown[0]}: choose from {', '.join(manifest.sets)}")
    blocked = [n for n in names if manifest.sets[n].get("not_fetchable")]
    if blocked:
        raise DataError(f"{blocked[0]} cannot be fetched: {manifest.sets[blocked[0]]['not_fetchable']}")
    return names or [n for n, s in manifest.sets.items() if not s.get("not_fetchable")]


def cmd_fetch(args) -> int:
    from schemas.settings import load_settings

    manifest = Manifest.load(args.manifest)
    names = _chosen(manifest, list(args.sets))
    root = Path(args.dir).expanduser() if args.dir else load_settings().data.fetch_dir
    base_url = args.base_url or os.environ.get(BASE_URL_ENV) or None
    print(f"data dir: {root}", flush=True)
    counts = fetch(manifest, names, root, base_url)
    print(f"{counts['fetched']} fetched, {counts['present']} already present ({', '.join(names)})", flush=True)
    if not os.environ.get("DIALCHECK_DATA_DIR") and not args.dir:
        current = Path(load_settings().data.dir)
        if current != root:
            print(f"note: commands read {current} first (../shared/data exists); set DIALCHECK_DATA_DIR={root} "
                  "to use these files", flush=True)
    return 0


def cmd_convert(args) -> int:
    from lab.evaluation.dialfact_format import convert
    from schemas.settings import load_settings

    out = Path(args.out)
    if out.is_dir() or not out.parent.is_dir():
        raise DataError(f"cannot write {out} (--out): {'a directory' if out.is_dir() else 'no such directory'}")
    n = convert(args.set, load_settings().data.dir, out, args.limit)
    print(f"{n} {args.set} records written to {out} (DialFact format)", flush=True)
    return 0


def set_report(manifest: Manifest, root: Path) -> list[dict[str, Any]]:
    rows = []
    for name, info in manifest.sets.items():
        states = {e["path"]: file_state(root, e) for e in manifest.files_of([name])}
        worst = ("corrupt" if "corrupt" in states.values() else "missing" if "missing" in states.values()
                 else "present")
        if worst == "missing" and "present" in states.values():
            worst = "partial"
        rows.append({"set": name, "title": info.get("title", name), "state": worst, "dir": str(root),
                     "files": states, "fetchable": not info.get("not_fetchable")})
    return rows


def cmd_list(args) -> int:
    from schemas.settings import load_settings

    manifest = Manifest.load(args.manifest)
    s = load_settings()
    root = Path(args.dir).expanduser() if args.dir else Path(s.data.dir)
    rows = set_report(manifest, root)
    if args.json:
        print(json.dumps({"dir": str(root), "looked_in": list(s.data.looked_in()), "sets": rows}, indent=1))
        return 0
    print(f"data dir: {root} (order: {', else '.join(s.data.looked_in())})" if not args.dir else f"data dir: {root}")
    for r in rows:
        bad = [p for p, st in r["files"].items() if st != "present"]
        detail = "" if not bad else "  " + ", ".join(f"{p} {r['files'][p]}" for p in bad[:3]) + (
            f" (+{len(bad) - 3} more)" if len(bad) > 3 else "")
        hint = "" if r["state"] == "present" else (
            f"  → dialcheck data fetch {r['set']}" if r["fetchable"] else "  → not fetchable (docs/cli.md)")
        print(f"{r['set']:<22}{r['state']:<9}{len(r['files'])} files{detail}{hint}")
    return 0
