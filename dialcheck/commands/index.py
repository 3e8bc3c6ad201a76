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
    b.add_argument("--index-name", default=None, help="OpenSearch index name")
    b.set_defaults(func=run_build)


def run_build(args) -> int:
    from schemas.settings import Settings, load_settings
    from workers.retrieval.build import build_index

    settings = load_settings(retrieval={"index_dir": args.out, "opensearch_url": args.url, "opensearch_index": args.index_name})
    sources = [s for s in args.sources.split(",") if s]
    if args.backend == "opensearch":
        from workers.retrieval.build import encode_passages
        from workers.retrieval.collection import build_collection
        from workers.retrieval.opensearch import build_opensearch_index

        passages = build_collection(settings.data.dir, sources, args.tsv)
        vectors = None
        if not args.no_vectors:
            from workers.models.encoders import load_local_encoder

            vectors = encode_passages(load_local_encoder(settings.models.encoder), passages)
        build_opensearch_index(passages, vectors, settings.retrieval.opensearch_url, settings.retrieval.opensearch_index)
        print(json.dumps({"backend": "opensearch", "url": settings.retrieval.opensearch_url,
                          "index": settings.retrieval.opensearch_index, "passages": len(passages)}))
        return 0
    index = build_index(settings, sources=sources, tsv=args.tsv, with_vectors=not args.no_vectors)
    print(json.dumps({"backend": "embedded", "dir": settings.retrieval.index_dir, **index.meta}), file=sys.stdout)
    return 0
