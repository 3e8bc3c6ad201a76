"""Build the configured model implementations: in-process by default, Triton when
settings.models.backend is a triton:// URL."""
from __future__ import annotations

from schemas.settings import Settings, load_settings

from schemas.protocols import Encoder, NLIModel


def load_models(settings: Settings) -> tuple[NLIModel, Encoder]:
    if settings.models.backend == "local":
        from .encoders import load_local_encoder
        from .onnx_nli import load_local_nli

        return load_local_nli(settings.models.nli_model_dir), load_local_encoder(settings.models.encoder)
    if settings.models.backend.startswith("triton"):
        from .triton import TritonEncoder, TritonNLI

        return TritonNLI.from_url(settings.models.backend), TritonEncoder.from_url(settings.models.backend, settings.models.encoder)
    raise ValueError(f"unknown models setting {settings.models.backend!r}: 'local' or 'triton://HOST:PORT'")
