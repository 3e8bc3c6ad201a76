"""`dialcheck nli train --device`: auto picks CUDA only when torch sees a GPU; bad names fail."""
import pytest
import torch

from dialcheck.cli import build_parser
from workers.nli.train import resolve_device


def test_device_resolution():
    assert resolve_device("cpu") == "cpu"
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ValueError):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError):
            resolve_device("cuda")


def test_train_flags_parse():
    args = build_parser().parse_args(["nli", "train", "--device", "cuda", "--batch-size", "128", "--lr", "1e-4",
                                      "--epochs", "2"])
    assert (args.device, args.batch_size, args.lr, args.epochs) == ("cuda", 128, 1e-4, 2.0)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["nli", "train", "--device", "gpu"])
