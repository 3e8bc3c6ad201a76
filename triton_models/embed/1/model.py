"""Triton Python-backend model `embed`: TEXT + IS_QUERY in, L2-normalised EMBEDDING out.

It runs the in-process encoder (workers.models.encoders.load_local_encoder), so E5's
"query: "/"passage: " prefixes and normalisation match in-process vectors exactly.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils


def _import_dialcheck() -> None:
    """Make `workers` importable: from the installed package, else from the repo this file is in."""
    try:
        import workers.models.encoders  # noqa: F401
    except ImportError:
        sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


class TritonPythonModel:
    def initialize(self, args: dict) -> None:
        _import_dialcheck()
        from workers.models import encoders

        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        name = params.get("encoder", "e5-onnx")
        threads = int(params.get("threads", 0)) or None
        self.encoder = encoders.E5Encoder(threads=threads) if name == "e5" else encoders.load_local_encoder(name)
        self.version = str(self.encoder.version).encode("utf-8")

    def execute(self, requests: list) -> list:
        """Rows of one dynamic batch are grouped by IS_QUERY (one prefix per engine call)."""
        texts: list[str] = []
        flags: list[bool] = []
        sizes: list[int] = []
        for r in requests:
            t = pb_utils.get_input_tensor_by_name(r, "TEXT").as_numpy().reshape(-1)
            q = pb_utils.get_input_tensor_by_name(r, "IS_QUERY").as_numpy().reshape(-1)
            texts += [x.decode("utf-8") if isinstance(x, bytes) else str(x) for x in t]
            flags += [bool(x) for x in np.broadcast_to(q, t.shape)]
            sizes.append(len(t))
        try:
            out = np.zeros((len(texts), self.encoder.dim), np.float32)
            for flag in (False, True):
                idx = [i for i, f in enumerate(flags) if f == flag]
                if idx:
                    out[idx] = self.encoder.encode([texts[i] for i in idx], is_query=flag)
        except Exception as e:
            err = pb_utils.TritonError(f"embed failed: {e}")
            return [pb_utils.InferenceResponse(output_tensors=[], error=err) for _ in requests]
        responses = []
        start = 0
        for n in sizes:
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("EMBEDDING", out[start:start + n]),
                pb_utils.Tensor("VERSION", np.full((n, 1), self.version, dtype=np.object_)),
            ]))
            start += n
        return responses
