#!/usr/bin/env bash
# One-time set-up (idempotent): a virtualenv in .venv with dialcheck and every dependency.
# torch is pinned to the CPU wheel 2.13.0 and installed first, so no CUDA build is pulled.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
if [ ! -f .venv/.dialcheck-installed ] || [ pyproject.toml -nt .venv/.dialcheck-installed ] \
   || [ infra/requirements-stream.txt -nt .venv/.dialcheck-installed ]; then
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q torch==2.13.0
  .venv/bin/pip install -q -e ".[test]"
  # after the rest: faust pins click<8.4, huggingface-hub's CLI wants >=8.4.2 (see pyproject.toml)
  # (pip then warns that huggingface-hub wants click>=8.4.2: expected, harmless)
  .venv/bin/pip install -q -r infra/requirements-stream.txt
  touch .venv/.dialcheck-installed
fi
# The real-browser test (tests/test_ui_browser.py) drives Debian's chromium + chromium-driver headless.
# Installed only when missing; needs root (CI runs as root), otherwise says what to install.
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium chromium-driver
  else
    echo "setup: chromium + chromium-driver missing (apt-get install chromium chromium-driver as root) - tests/test_ui_browser.py needs them" >&2
  fi
fi
