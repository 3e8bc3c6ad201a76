"""Model interfaces (NLIModel, Encoder) and their implementations: in-process and Triton."""
from schemas.protocols import Encoder, ModelUnavailable, NLIModel

__all__ = ["Encoder", "ModelUnavailable", "NLIModel"]
