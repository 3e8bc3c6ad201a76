"""Tokeniser step of the GPU `nli` ensemble: the same tokenizer call as OnnxNLI.logits
(pairs, padding to the longest in the request, truncation="longest_first", max_length from the
config, else calibration.json `max_length`, else 256), with the artifact's own tokenizer files
(WordPiece, BPE or SentencePiece). It emits the encodings its config lists as outputs: an
adopted RoBERTa or DeBERTa-v3 takes no token_type_ids (infra/make_gpu_repository.py --artifact)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args: dict) -> None:
        from transformers import AutoTokenizer

        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        d = Path(args["model_repository"]) / args["model_version"]
        self.tokenizer = AutoTokenizer.from_pretrained(str(d / "tokenizer"))
        cal = json.loads((d / "calibration.json").read_text()) if (d / "calibration.json").exists() else {}
        self.max_length = int(params.get("max_length") or cal.get("max_length") or 256)
        self.encodings = [o["name"] for o in config.get("output", [])
                          if o["name"] in ("input_ids", "attention_mask", "token_type_ids")]
        self.temperature = np.float32(cal.get("temperature", 1.0))
        self.version = str(cal.get("version", "dialcheck-nli")).encode("utf-8")

    def execute(self, requests: list) -> list:
        out = []
        for r in requests:
            p = [x.decode("utf-8") for x in pb_utils.get_input_tensor_by_name(r, "PREMISE").as_numpy().reshape(-1)]
            h = [x.decode("utf-8") for x in pb_utils.get_input_tensor_by_name(r, "HYPOTHESIS").as_numpy().reshape(-1)]
            enc = self.tokenizer(p, h, padding=True, truncation="longest_first", max_length=self.max_length,
                                 return_tensors="np")
            n = len(p)
            tensors = [pb_utils.Tensor(k, (enc[k] if k in enc else np.zeros_like(enc["input_ids"])).astype(np.int64))
                       for k in self.encodings]
            out.append(pb_utils.InferenceResponse(output_tensors=tensors + [
                pb_utils.Tensor("TEMPERATURE", np.full((n, 1), self.temperature, np.float32)),
                pb_utils.Tensor("VERSION", np.full((n, 1), self.version, dtype=np.object_)),
            ]))
        return out
