# dialcheck stream worker / indexer: the package with exactly the [stream,opensearch] extras.
# The same install script runs in tests/test_compose_stack.py (fresh virtualenv, no Docker here).
FROM python:3.11-slim
WORKDIR /app
ENV HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PIP_NO_CACHE=1 UV_NO_CACHE=1 \
    DIALCHECK_NLI_MODEL_DIR=/app/triton_models/nli/1 \
    TORCH_INDEX=https://download.pytorch.org/whl/cpu
COPY pyproject.toml README.md ./
COPY infra/overrides.txt infra/overrides.txt
COPY infra/docker/install.sh infra/docker/install.sh
COPY dialcheck/ dialcheck/
COPY workers/ workers/
COPY streams/ streams/
COPY schemas/ schemas/
COPY lab/ lab/
COPY triton_models/nli/1/ triton_models/nli/1/
RUN PYTHON=python sh infra/docker/install.sh ".[stream,opensearch]"
USER 1000:1000
EXPOSE 9464
ENTRYPOINT []
