"""Build the configured model implementations: in-process by default, Triton when
settings.models.backend is a triton:// URL."""
from __future__ import annotations

from schemas.settings import Settings

from schemas.protocols import Encoder, NLIModel


def load_models(settings: Settings) -> tuple[NLIModel, Encoder]:
    if settings.models.backend == "local":
        from .encoders import load_local_encoder

        return load_nli(settings), load_local_encoder(settings.models.encoder, resolve_device(settings.models.device))
    if settings.models.backend.startswith("triton"):
        from .triton import TritonEncoder

        return load_nli(settings), TritonEncoder.from_url(settings.models.backend, settings.models.encoder)
    raise ValueError(f"unknown models setting {settings.models.backend!r}: 'local' or 'triton://HOST:PORT'")


def load_nli(settings: Settings) -> NLIModel:
    """The NLI model alone (a reload re-reads it without the encoder)."""
    if settings.models.backend == "local":
        from .onnx_nli import load_local_nli

        m = settings.models
        return load_local_nli(m.nli_model_dir, m.ort_threads, m.ort_graph_optimization, resolve_device(m.device),
                              m.nli_torch_dir, m.ort_nli_chunk, m.ort_nli_sort, m.ort_nli_workers)
    if settings.models.backend.startswith("triton"):
        from .triton import TritonNLI

        return TritonNLI.from_url(settings.models.backend)
    raise ValueError(f"unknown models setting {settings.models.backend!r}: 'local' or 'triton://HOST:PORT'")


def resolve_device(device: str) -> str:
    """'auto' → 'cuda' when torch sees a GPU, else 'cpu'."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
