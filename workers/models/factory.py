"""Build the configured model implementations: in-process by default, Triton when
settings.models is a triton:// URL."""
from __future__ import annotations

from dialcheck.settings import Settings

from .base import Encoder, NLIModel


def load_models(settings: Settings) -> tuple[NLIModel, Encoder]:
    if settings.models == "local":
        from .encoders import load_local_encoder
        from .onnx_nli import load_local_nli

        return load_local_nli(settings.nli_model_dir), load_local_encoder(settings.encoder)
    if settings.models.startswith("triton"):
        from .triton import TritonEncoder, TritonNLI

        return TritonNLI.from_url(settings.models), TritonEncoder.from_url(settings.models, settings.encoder)
    raise ValueError(f"unknown models setting {settings.models!r}: 'local' or 'triton://HOST:PORT'")
