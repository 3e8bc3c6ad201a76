"""Model interfaces (NLIModel, Encoder) and their implementations: in-process and Triton."""
from .base import Encoder, ModelUnavailable, NLIModel

__all__ = ["Encoder", "ModelUnavailable", "NLIModel"]
