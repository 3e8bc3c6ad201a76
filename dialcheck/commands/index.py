"""`dialcheck index build`: passage collection → embedded BM25 + vectors (or OpenSearch)."""
from __future__ import annotations

import json
import sys


def register(sub) -> None:
    p = sub.add_parser("index", help="passage index commands")
    isub = p.add_subparsers(dest="index_command", required=True)
    b = isub.add_parser("build", help="build the passage index")
    b.add_argument("--out", default=None, help="index directory (embedded backend)")
    b.add_argument("--sources", default="dialfact,foolmetwice", help="comma list of dialfact,foolmetwice,wice")
    b.add_argument("--tsv", default=None, help="Wikipedia passage dump: id<TAB>title<TAB>text")
    b.add_argument("--no-vectors", action="store_true", help="skip encoder vectors (BM25 only)")
    b.add_argument("--backend", choices=["embedded", "opensearch"], default="embedded")
    b.add_argument("--url", default=None, help="OpenSearch URL (backend opensearch)")
    b.add_argument("--index-name", default=None,
                   help="OpenSearch alias readers use (default DIALCHECK_OPENSEARCH_INDEX); each build writes "
                        "<alias>-v<UTC time> and moves the alias to it when complete")
    b.add_argument("--keep", type=int, default=1, help="previous OpenSearch versions kept for rollback (default 1)")
    b.set_defaults(func=run_build)


def run_build(args) -> int:
    from schemas.settings import load_settings, redact
    from workers.retrieval.build import build_index

    from workers.retrieval.collection import ALL_SOURCES

    from dialcheck.errors import UsageError

    settings = load_settings(retrieval={"index_dir": args.out, "opensearch_url": args.url, "opensearch_index": args.index_name})
    sources = [s.strip() for s in args.sources.split(",") if s.strip()]
    unknown = [s for s in sources if s not in ALL_SOURCES]
    if unknown or not sources:
        raise UsageError(f"unknown --sources {','.join(unknown) or '(none)'}: choose from {','.join(ALL_SOURCES)}")
    if args.keep < 0:
        raise UsageError(f"--keep must be at least 0 (got {args.keep})")
    if args.backend == "opensearch":
        from workers.retrieval.build import encode_passages
        from workers.retrieval.collection import build_collection
        from workers.retrieval.opensearch import build_versioned_index

        passages = build_collection(settings.data.dir, sources, args.tsv)
        vectors = None
        if not args.no_vectors:
            from workers.models.encoders import load_local_encoder

            vectors = encode_passages(load_local_encoder(settings.models.encoder), passages)
        result = build_versioned_index(passages, vectors, settings.retrieval.opensearch_url,
                                       settings.retrieval.opensearch_index, keep=args.keep,
                                       k1=settings.retrieval.bm25_k1, b=settings.retrieval.bm25_b)
        print(json.dumps({"backend": "opensearch", "url": redact(settings.retrieval.opensearch_url), **result}))
        return 0
    index = build_index(settings, sources=sources, tsv=args.tsv, with_vectors=not args.no_vectors)
    print(json.dumps({"backend": "embedded", "dir": settings.retrieval.index_dir, **index.meta}), file=sys.stdout)
    return 0
