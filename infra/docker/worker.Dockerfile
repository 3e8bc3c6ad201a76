# dialcheck stream worker / indexer: the package and its pinned dependencies (pyproject.toml).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml ./
COPY dialcheck/ dialcheck/
COPY workers/ workers/
COPY streams/ streams/
COPY schemas/ schemas/
COPY triton_models/nli/1/ triton_models/nli/1/
RUN pip install --no-cache-dir --extra-index-url https://download.pytorch.org/whl/cpu .
ENV HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
USER 1000:1000
ENTRYPOINT []
