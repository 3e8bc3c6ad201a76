"""Implementations of the model interfaces of schemas/protocols.py (NLIModel, Encoder; re-exported here):
in process (ONNX Runtime or torch NLI, E5/MiniLM encoders) and served (Triton clients), and the factory
that builds the configured pair."""
from schemas.protocols import Encoder, ModelUnavailable, NLIModel

__all__ = ["Encoder", "ModelUnavailable", "NLIModel"]
