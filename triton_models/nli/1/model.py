"""Triton Python-backend model `nli`: raw (premise, hypothesis) text in, logits out.

It runs the in-process implementation (workers.models.onnx_nli.OnnxNLI.logits) on the artifact
in this version directory, so tokenisation, truncation and the ONNX graph are by construction
the same as in-process; clients apply the temperature (returned as TEMPERATURE) themselves.
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
        import workers.models.onnx_nli  # noqa: F401
    except ImportError:
        sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


def _strings(request, name: str) -> list[str]:
    arr = pb_utils.get_input_tensor_by_name(request, name).as_numpy().reshape(-1)
    return [x.decode("utf-8") if isinstance(x, bytes) else str(x) for x in arr]


class TritonPythonModel:
    def initialize(self, args: dict) -> None:
        _import_dialcheck()
        from workers.models import onnx_nli

        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        artifact = Path(args["model_repository"]) / args["model_version"]
        # max_length: the config's parameter, else the artifact's calibration.json (an adopted model)
        self.nli = onnx_nli.OnnxNLI(artifact, batch_size=int(params.get("batch_size", 32)),
                                    threads=int(params.get("intra_op_threads", 0)), workers=1,
                                    max_length=int(params["max_length"]) if params.get("max_length") else None)
        self.temperature = np.float32(self.nli.temperature)
        self.version = str(self.nli.version).encode("utf-8")
        self.merge_requests = params.get("merge_requests", "false").lower() == "true"

    def execute(self, requests: list) -> list:
        """merge_requests false (default): one forward pass per request, so a client sending
        OnnxNLI's length-sorted chunks gets bit-for-bit the in-process numbers even from an int8
        artifact (its per-pass activation scales depend on batch members). true: all requests of
        a dynamic batch share length-sorted passes (more throughput, ~1e-2 drift with int8)."""
        groups = [requests] if self.merge_requests else [[r] for r in requests]
        responses = []
        for group in groups:
            responses += self._run(group)
        return responses

    def _run(self, requests: list) -> list:
        premises: list[str] = []
        hypotheses: list[str] = []
        sizes: list[int] = []
        for r in requests:
            p, h = _strings(r, "PREMISE"), _strings(r, "HYPOTHESIS")
            premises += p
            hypotheses += h
            sizes.append(len(p))
        try:
            logits = self.nli.logits(premises, hypotheses) if premises else np.zeros((0, 3), np.float32)
        except Exception as e:  # one bad batch must not kill the instance
            err = pb_utils.TritonError(f"nli forward failed: {e}")
            return [pb_utils.InferenceResponse(output_tensors=[], error=err) for _ in requests]
        responses = []
        start = 0
        for n in sizes:
            out = logits[start:start + n].astype(np.float32)
            start += n
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("LOGITS", out),
                pb_utils.Tensor("TEMPERATURE", np.full((n, 1), self.temperature, np.float32)),
                pb_utils.Tensor("VERSION", np.full((n, 1), self.version, dtype=np.object_)),
            ]))
        return responses
