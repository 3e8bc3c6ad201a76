"""`dialcheck nli train --device`: auto picks CUDA only when torch sees a GPU; bad names fail."""
import pytest
import torch

from dialcheck.cli import build_parser
from lab.nli.train import resolve_device


@pytest.mark.unit
def test_device_resolution():
    assert resolve_device("cpu") == "cpu"
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ValueError):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError):
            resolve_device("cuda")


@pytest.mark.unit
def test_train_flags_parse():
    args = build_parser().parse_args(["nli", "train", "--device", "cuda", "--batch-size", "128", "--lr", "1e-4",
                                      "--epochs", "2"])
    assert (args.device, args.batch_size, args.lr, args.epochs) == ("cuda", 128, 1e-4, 2.0)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["nli", "train", "--device", "gpu"])


@pytest.mark.model
def test_continue_from_a_trained_checkpoint_on_a_pairs_file(tmp_path, settings):
    """--init-from keeps the trained head (lr 0 leaves every weight as loaded) and --pairs-file
    replaces training_pairs() with the file's pairs, capped by --max-pairs."""
    from pathlib import Path

    from safetensors.torch import load_file

    from lab.nli.data import NLIPair
    from lab.nli.hard_pairs import write_pairs
    from lab.nli.train import TrainConfig, train

    init = Path(settings.data.dir).parent / "models" / "nli-minilm-l6-h200"
    if not (init / "model.safetensors").exists():
        pytest.skip("no ../shared/models/nli-minilm-l6-h200 on this machine")
    pairs = tmp_path / "pairs.jsonl"
    write_pairs(pairs, [NLIPair(f"A man plays guitar number {i}.", "A man sleeps.", i % 3, "t") for i in range(12)])
    out = train(TrainConfig(out_dir=str(tmp_path / "run"), init_from=str(init), pairs_file=str(pairs),
                            max_pairs=8, batch_size=4, lr=0.0, warmup_ratio=0.0, threads=1, device="cpu"))
    import json

    cfg = json.loads((tmp_path / "run" / "train_config.json").read_text())
    assert cfg["train_pairs"] == 8 and cfg["source_counts"] == {"t": 8} and cfg["total_steps"] == 2
    before, after = load_file(str(init / "model.safetensors")), load_file(str(out / "model.safetensors"))
    head = [k for k in before if k.startswith("classifier")]
    assert head
    for k in head:
        assert torch.allclose(before[k].float(), after[k].float(), atol=1e-3)


@pytest.mark.model
def test_unpack_rebuilds_the_shipped_model_from_its_onnx(tmp_path, settings):
    """`dialcheck nli unpack`: the checkpoint rebuilt from the released ONNX (config from the installed
    MiniLM base) gives the artifact's own logits, so training can continue from the shipped model (a
    wrong or untransposed weight fails)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from dialcheck.cli import main
    from workers.models.onnx_nli import OnnxNLI

    artifact, out = settings.models.nli_model_dir, tmp_path / "unpacked"
    assert main(["nli", "unpack", artifact, "--out", str(out)]) == 0
    premises = ["Ada Lovelace was born in 1815 in London.", "The cat sat on the mat all afternoon."]
    hypotheses = ["Ada Lovelace was born in London.", "A dog is sleeping outside."]
    tok = AutoTokenizer.from_pretrained(str(out))
    model = AutoModelForSequenceClassification.from_pretrained(str(out)).eval()
    with torch.no_grad():
        got = model(**tok(premises, hypotheses, return_tensors="pt", padding=True)).logits.numpy()
    want = OnnxNLI(artifact).logits(premises, hypotheses)
    assert abs(got - want).max() < 1e-3
