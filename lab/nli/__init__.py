"""The NLI model's offline side (the runtime never imports lab/): training pairs (data, hard_pairs,
attribution_pairs, labels), fine-tuning (train), ONNX export and its inverse (export), temperature
calibration (calibrate), the released artifact and its card (release, model_card), weight soups (soup),
static int8 (quantize), held-out benchmarks (benchmarks), and adopting another HF NLI checkpoint as an
artifact (adopt). Inference is in workers/models (onnx_nli.py in process, triton.py served)."""
