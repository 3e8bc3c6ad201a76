"""`dialcheck index build`: passage collection → embedded BM25 + vectors (or OpenSearch)."""
from __future__ import annotations

import json
import sys


def register(sub) -> None:
    p = sub.add_parser("index", help="passage index commands")
    isub = p.add_subparsers(dest="index_command", required=True)
    b = isub.add_parser("build", help="build the passage index")
    b.add_argument("--out", default=None, help="index directory (embedded backend)")
    b.add_argument("--sources", default=None,
                   help="comma list of dialfact,foolmetwice,wice,starter (default: dialfact,foolmetwice,starter; "
                        "without starter when DIALCHECK_STARTER_KB=0); \"\" with --tsv: your own corpus alone")
    b.add_argument("--tsv", default=None, help="your passages: id<TAB>title<TAB>text (a header row 'id ...' is skipped); "
                                                "added to --sources, or alone with --sources \"\"")
    b.add_argument("--no-vectors", action="store_true", help="skip encoder vectors (BM25 only)")
    b.add_argument("--backend", choices=["embedded", "opensearch"], default="embedded",
                   help="embedded: a directory index (default); opensearch: an OpenSearch server (--url)")
    b.add_argument("--url", default=None, help="OpenSearch URL (backend opensearch)")
    b.add_argument("--index-name", default=None,
                   help="OpenSearch alias readers use (default DIALCHECK_OPENSEARCH_INDEX); each build writes "
                        "<alias>-v<UTC time> and moves the alias to it when complete")
    b.add_argument("--keep", type=int, default=1, help="previous OpenSearch versions kept for rollback (default 1)")
    b.set_defaults(func=run_build)


def run_build(args) -> int:
    from schemas.settings import load_settings, redact
    from workers.retrieval.collection import ALL_SOURCES
    from workers.retrieval.factory import build_index

    from dialcheck.errors import UsageError

    settings = load_settings(retrieval={"index_dir": args.out, "opensearch_url": args.url, "opensearch_index": args.index_name})
    sources = None if args.sources is None else [s.strip() for s in args.sources.split(",") if s.strip()]
    unknown = [s for s in sources or [] if s not in ALL_SOURCES]
    if unknown:
        raise UsageError(f"unknown --sources {','.join(unknown)}: choose from {','.join(ALL_SOURCES)} "
                         "(or --sources \"\" with --tsv for your own corpus alone)")
    if sources == [] and not args.tsv:
        raise UsageError("nothing to index: --sources \"\" needs --tsv YOUR.tsv (id<TAB>title<TAB>text)")
    if args.keep < 0:
        raise UsageError(f"--keep must be at least 0 (got {args.keep})")
    settings = settings.updated(retrieval={"backend": args.backend})
    from dialcheck.commands.data import SOURCE_FILES, require
    from workers.retrieval.collection import DEFAULT_SOURCES

    require(settings, *(SOURCE_FILES[s] for s in (DEFAULT_SOURCES if sources is None else sources)
                        if s in SOURCE_FILES))  # missing data: one line naming `dialcheck data fetch`
    result = build_index(settings, sources, args.tsv, with_vectors=not args.no_vectors, keep=args.keep)
    if result["backend"] == "opensearch":
        result = {"backend": "opensearch", "url": redact(settings.retrieval.opensearch_url), **result}
    print(json.dumps(result), file=sys.stdout)
    return 0

