"""Adapt the shipped NLI verifier to a deployment's judged verdicts on CPU (`dialcheck adapt`).

Why binary losses: a judgement speaks about one probability (lab/nli/judged.py). An entailment /
not_entailment pair trains p(entailment) of the three-way softmax against the rest, a contradiction
/ not_contradiction pair p(contradiction); how the rest divides between the other two columns is
held to what the shipped model says (a KL term, `KEEP`): without it a "not supported" judgement
pushes mass into contradiction as readily as into neutral, and unrelated evidence starts to refute
(measured: 1.0 → 11.5 % REFUTES with the top two layers at lr 3e-4). The probabilities trained are
the served ones: softmax(logits / T) with the shipped model's temperature T, which the adapted model keeps.

Why only the top layers (`TRAIN_LAYERS`, `Trunk`): the layers below are run once per pair instead of
once per step and fold, which is most of a CPU fine-tune's cost, and what they read stays the shipped one.

Why interpolation: fine-tuned on one deployment's replies, the model learns that deployment's
convention and loses ground elsewhere. WiSE-FT (Wortsman et al., 2022) — the adapted weights
averaged with the shipped ones — keeps most of the gain and most of the rest. `dialcheck adapt`
mixes in torch (`TorchMixes`: scored, and exported once per mix it writes or certifies, so the
model written is the one measured); `interpolate` averages two ONNX exports for the learning
curve (lab/nli/adapt_curve.py). The weight is chosen on the hold-out conversations by
lab/nli/adapt_run.py.

Why replay (learning without forgetting, Li & Hoiem 2016): the judged replies alone pull the top
layers toward one deployment's convention, and general NLI slips (SNLI test accuracy 0.738 → 0.670 at
mix 1.0 on 392 FaithDial labels), so the anchor guard refused every mix above 0.25. Beside each step's
judged batch a few general NLI pairs from the training side (`replay_pairs`: the training split of
lab/nli/data.py's sources, never an evaluation set) are held to the shipped model's three-way
probabilities by a KL term (`REPLAY`), computed once before training like the KEEP term's. Off by
default (`dialcheck adapt --replay-pairs 384`): on FaithDial it let mix 1.0 through the anchor (0.738 →
0.724 at 392 labels, → 0.720 at 576) and ranked the held-out conversations better, but certified fewer
badges (392: none from 0.75 up, where mix 0.25 without it certified 0.77 on 2.3 % of replies; 576: 0.85
on 8.2 % against 9.4 %).

Training starts from the shipped ONNX weights (export.onnx_to_checkpoint), so a fresh clone adapts
the model it serves, not a file on one machine."""
from __future__ import annotations

import json
import math
import random
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from .judged import JudgedPair

THREADS = 2
BATCH = 16
MAX_STEPS = 300
TRAIN_LAYERS = 2  # the top encoder layers fine-tuned; the ones below stay the shipped ones (`Trunk`)
KEEP = 1.0  # weight of the KL term that keeps the base's split of the two columns a judgement is silent on
REPLAY = 1.0  # weight of the KL term holding the base's three-way probabilities on the replay pairs
REPLAY_PAIRS = 384  # general NLI pairs replayed when asked (`dialcheck adapt --replay-pairs`; off by default)
REPLAY_BATCH = 8  # of them beside each step's judged batch
LR = 3e-4  # for those two layers: a whole-model rate (3e-5) barely moves them (docs/history/adapt-speed-2026-12-06.md)
TUNED = "tuned.pt"  # fine_tune(export=False): the tuned weights, torch state dict
# (column, positive?) each target trains: entailment column 0, contradiction column 2
TARGET_LOSS = {"entailment": (0, 1.0), "not_entailment": (0, 0.0),
               "contradiction": (2, 1.0), "not_contradiction": (2, 0.0)}


def _nli(model_dir: str | Path):
    from workers.models.onnx_nli import OnnxNLI

    return OnnxNLI(model_dir, batch_size=16, threads=THREADS, workers=1)


def predicted(nli, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
    """`nli`'s calibrated (entailment, neutral, contradiction) per pair, as the runtime computes them
    (an (0, 3) array for no pair): the one place a model's probabilities are read here."""
    if not len(premises):
        return np.zeros((0, 3))
    return np.asarray(nli.predict(list(premises), list(hypotheses)), dtype=float)


def nli_probs(model_dir: str | Path, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
    """Calibrated (entailment, neutral, contradiction) per pair of the model in `model_dir`."""
    return predicted(_nli(model_dir), premises, hypotheses)


def p_supports(model_dir: str | Path, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
    """p(entailment) per pair: the probability a SUPPORTS verdict rests on."""
    return nli_probs(model_dir, premises, hypotheses)[:, 0]


def _checkpoint(base_dir: Path, work: Path) -> Path:
    from .export import onnx_to_checkpoint

    return onnx_to_checkpoint(base_dir, work / "base-checkpoint")


def base_checkpoint(base_dir: str | Path, out_dir: str | Path) -> Path:
    """The base artifact as a trainable checkpoint in `out_dir`, once for several `fine_tune` calls."""
    from .export import onnx_to_checkpoint

    return onnx_to_checkpoint(Path(base_dir), Path(out_dir))


def _snli_eval(root: Path) -> tuple[set, set]:
    """SNLI dev and test (lab/nli/data.py EXCLUDED_SOURCES: evaluation only, the anchor guard reads
    test): their (premise, hypothesis) pairs and their premises (an image caption: its other pairs)."""
    from .data import snli_sentences

    pairs: set = set()
    for split in ("dev", "test"):
        try:
            pairs.update(snli_sentences(root, split))
        except OSError:
            continue
    return pairs, {a for a, _ in pairs}


def replay_pairs(data_dir: str | Path, n: int = REPLAY_PAIRS, seed: int = 0) -> tuple[list, dict]:
    """`n` general NLI pairs to replay, seeded: a uniform sample of the training split of every
    training source this data dir has (lab/nli/data.py TRAIN_SOURCES; `is_validation` pairs left out),
    never a pair or premise of SNLI dev/test. Returns (pairs, {source: count in the sample}); ([], {})
    when no source is there. Reading every source is about 1.5 s."""
    from .data import TRAIN_SOURCES, is_validation

    root = Path(data_dir)
    if n <= 0 or not str(data_dir):
        return [], {}
    held_pairs, held_premises = _snli_eval(root)
    pool, seen = [], set()
    for src in TRAIN_SOURCES:
        try:
            for p in src.reader(root):
                key = None if p is None else (p.premise, p.hypothesis)
                if key is None or key in seen or key in held_pairs or p.premise in held_premises or is_validation(p):
                    continue
                seen.add(key)
                pool.append(p)
        except (OSError, KeyError, ValueError):  # a source this data dir lacks (or a cut file): skipped
            continue
    sample = pool if len(pool) <= n else random.Random(seed).sample(pool, n)
    counts: dict[str, int] = {}
    for p in sample:
        counts[p.source] = counts.get(p.source, 0) + 1
    return sample, dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def _chunks(start: int, stop: int, size: int = 32) -> list[list[int]]:
    """Indices start … stop−1 in runs of `size` (what the base is asked about before training)."""
    return [list(range(i, min(i + size, stop))) for i in range(start, stop, size)]


class _Draws:
    """Indices 0 … n−1 in passes, each pass shuffled by `rng` when the last one runs short: the
    judged pairs and the replay pairs each have one, drawing from the same generator."""

    def __init__(self, n: int, rng: random.Random):
        self.n, self.rng, self.queue = n, rng, []

    def take(self, k: int) -> list[int]:
        if len(self.queue) < k:
            more = list(range(self.n))
            self.rng.shuffle(more)
            self.queue += more
        out, self.queue = self.queue[:k], self.queue[k:]
        return out


def steps_for(n_pairs: int, epochs: float = 3.0, max_steps: int = MAX_STEPS, batch_size: int = BATCH) -> int:
    """Optimiser steps for `n_pairs`: `epochs` passes, at most `max_steps` (the CPU budget)."""
    return max(1, min(max_steps, math.ceil(epochs * n_pairs / batch_size)))


def fine_tune(base_dir: str | Path, pairs: Sequence[JudgedPair], *, seed: int, out_dir: str | Path,
              epochs: float = 3.0, max_steps: int = MAX_STEPS, lr: float = LR, batch_size: int = BATCH,
              max_length: int | None = None, progress: bool = True, version: str | None = None,
              checkpoint: str | Path | None = None, export: bool = True, train_layers: int | None = TRAIN_LAYERS,
              trunk: "Trunk | None" = None, replay: Sequence | None = None, replay_weight: float = REPLAY,
              replay_batch: int = REPLAY_BATCH, replay_loss: str = "distill", replay_note: dict | None = None) -> Path:
    """Fine-tune the artifact in `base_dir` on `pairs` (binary losses, module docstring) and write an
    artifact to `out_dir`: model.onnx, tokenizer/, calibration.json (the base temperature; version
    `version`, default `<base version>+adapt-<pairs sha1[:8]>`). Returns `out_dir`. `checkpoint`: the
    base already rebuilt as a trainable checkpoint (`base_checkpoint`), for several fine-tunes of one base.
    `export=False`: no ONNX export, the weights as TUNED (torch) beside calibration.json — for a model
    that is only scored (`TorchMixes`) and exported at most once, at the weight chosen (`TorchMixes.export`).
    `train_layers`: the top encoder layers trained (with the classifier); the layers below keep the
    base weights and their output is computed once per pair by `trunk` (`Trunk`; pass one to share it
    between fine-tunes of one base). None, or the encoder's depth: every layer is trained.
    `replay`: general NLI pairs (`replay_pairs`, with .premise, .hypothesis, .label) of which
    `replay_batch` go beside each step's judged batch: `replay_loss` "distill" holds the base's three
    probabilities on them (KL(base ‖ adapted), weight `replay_weight`), "gold" trains their three-way
    label (cross-entropy). `replay_note` (where they came from) goes into calibration.json's `adapt`."""
    import torch

    from workers.models.onnx_nli import MAX_LENGTH, read_calibration

    base_dir, out = Path(base_dir), Path(out_dir)
    _check_tune(pairs, replay_loss)
    replay = list(replay or [])
    cal = read_calibration(base_dir)
    length = int(max_length or cal.get("max_length") or MAX_LENGTH)
    torch.set_num_threads(THREADS)
    torch.manual_seed(seed)
    rng = random.Random(seed)
    total = steps_for(len(pairs), epochs, max_steps, batch_size)
    loss = _Loss(replay_weight, replay_batch, replay_loss)
    with tempfile.TemporaryDirectory(prefix="dialcheck-adapt-") as tmp:
        work = Path(tmp)
        ckpt = Path(checkpoint) if checkpoint else _checkpoint(base_dir, work)
        run = _Tuning.start(ckpt, base_dir, pairs, replay, train_layers, trunk, length,
                            float(cal.get("temperature", 1.0)))
        _train(run, loss, rng, total, lr, batch_size, progress)
        out.mkdir(parents=True, exist_ok=True)
        _save_tuned(run, work, out, export)
    _write_tuned_calibration(out, cal, pairs, version, adapt={
        "seed": seed, "steps": total, "lr": lr, "batch_size": batch_size, "max_length": length, "weight": 1.0,
        "trained_layers": len(_layers(run.model)) - run.frozen, "loss": loss.describe(len(replay)),
        "replay": ({"pairs": len(replay), "weight": replay_weight, "per_step": replay_batch, "loss": replay_loss,
                    **(replay_note or {})} if replay else {"pairs": 0, **(replay_note or {})})})
    return out


def _check_tune(pairs: Sequence[JudgedPair], replay_loss: str) -> None:
    """The caller's mistakes, before anything is loaded."""
    bad = sorted({p.target for p in pairs} - set(TARGET_LOSS))
    if bad:
        raise ValueError(f"unknown targets {bad}: one of {', '.join(TARGET_LOSS)}")
    if not pairs:
        raise ValueError("no pairs to fine-tune on")
    if replay_loss not in ("distill", "gold"):
        raise ValueError(f"replay_loss must be distill or gold, got {replay_loss!r}")


@dataclass(frozen=True)
class _Loss:
    """The replay term's recipe (the judged pairs' binary loss and KEEP term are fixed)."""
    replay_weight: float
    replay_batch: int
    replay_loss: str

    def describe(self, replayed: int) -> str:
        return ("binary cross-entropy on the judged class's calibrated probability, plus "
                f"{KEEP} × KL keeping the base's split of the other two classes" + (
                    f", plus {self.replay_weight} × " + (
                        "KL(base ‖ adapted) over the three classes" if self.replay_loss == "distill"
                        else "three-way cross-entropy on the gold labels") +
                    f" of {self.replay_batch} general NLI pairs per step" if replayed else ""))


@dataclass
class _Tuning:
    """One fine-tune's model and what its steps read: the judged pairs' texts, then the replay pairs'
    (`texts`), their trunk output or tokens, and the columns and targets the binary loss trains."""
    model: object
    tok: object
    frozen: int
    trunk: "Trunk | None"
    enc: object
    texts: list
    n_judged: int
    cols: object
    ys: object
    temperature: float
    replay: list

    @classmethod
    def start(cls, ckpt: Path, base_dir: Path, pairs: Sequence[JudgedPair], replay: list,
              train_layers: int | None, trunk: "Trunk | None", length: int, temperature: float) -> "_Tuning":
        """The checkpoint loaded with its embeddings and lower layers frozen, and every pair prepared."""
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        texts = [(p.premise, p.hypothesis) for p in pairs] + [(r.premise, r.hypothesis) for r in replay]
        tok = AutoTokenizer.from_pretrained(str(ckpt))
        model = AutoModelForSequenceClassification.from_pretrained(str(ckpt)).float()
        for param in model.base_model.embeddings.parameters():  # the vocabulary stays the shipped one:
            param.requires_grad = False  # less to forget, and a third of the CPU time of a step
        frozen = 0 if train_layers is None else max(0, len(_layers(model)) - int(train_layers))
        for layer in _layers(model)[:frozen]:
            for param in layer.parameters():
                param.requires_grad = False
        if frozen:
            trunk = trunk if trunk is not None else trunk_for(ckpt, base_dir, train_layers)
            if trunk.frozen != frozen or trunk.max_length != length:
                raise ValueError(f"the trunk runs {trunk.frozen} layers at {trunk.max_length} tokens, "
                                 f"this fine-tune freezes {frozen} at {length}")
            trunk.add([t[0] for t in texts], [t[1] for t in texts])
        enc = None if frozen else tok([t[0] for t in texts], [t[1] for t in texts],
                                      truncation="longest_first", max_length=length)  # the trunk tokenizes its own
        return cls(model, tok, frozen, trunk if frozen else None, enc, texts, len(pairs),
                   torch.tensor([TARGET_LOSS[p.target][0] for p in pairs]),
                   torch.tensor([TARGET_LOSS[p.target][1] for p in pairs]), temperature, replay)

    def logits(self, idx: list[int]):
        """Calibrated logits of `texts[idx]` (the judged pairs, then the replay pairs)."""
        import torch

        if self.frozen:
            return self.trunk.head(self.model, [self.texts[i] for i in idx]) / self.temperature
        enc = self.enc
        width = max(len(enc["input_ids"][i]) for i in idx)
        inp = torch.zeros(len(idx), width, dtype=torch.long)
        tt, att = torch.zeros_like(inp), torch.zeros_like(inp)
        for r, i in enumerate(idx):
            n = len(enc["input_ids"][i])
            inp[r, :n] = torch.tensor(enc["input_ids"][i])
            tt[r, :n] = torch.tensor(enc["token_type_ids"][i])
            att[r, :n] = 1
        return self.model(input_ids=inp, token_type_ids=tt, attention_mask=att).logits / self.temperature

    def others(self, logits, idx: list[int]):
        """log p of the two columns a pair's judgement does not speak about, given not its own."""
        import torch

        keep = torch.ones(len(idx), 3, dtype=torch.bool)
        keep[torch.arange(len(idx)), self.cols[idx]] = False
        rest = logits[keep].view(len(idx), 2)
        return rest - torch.logsumexp(rest, dim=1, keepdim=True)

    def base_terms(self):
        """What the base says, before training: the judged pairs' other two columns (the KEEP term)
        and the replay pairs' three (the REPLAY term; None without replay)."""
        import torch

        self.model.eval()
        with torch.inference_mode():
            rest = torch.cat([self.others(self.logits(idx), idx) for idx in _chunks(0, self.n_judged)])
            replayed = torch.cat([torch.log_softmax(self.logits(idx), dim=1)
                                  for idx in _chunks(self.n_judged, len(self.texts))]) if self.replay else None
        return rest, replayed


def _train(run: _Tuning, loss: _Loss, rng: random.Random, total: int, lr: float, batch_size: int,
           progress: bool) -> None:
    """`total` AdamW steps (warm-up a tenth, then linear decay) on the binary loss, the KEEP term and,
    with replay, the REPLAY term."""
    import torch

    model = run.model
    opt = torch.optim.AdamW([q for q in model.parameters() if q.requires_grad], lr=lr, weight_decay=0.01)
    warm = max(1, total // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm) * max(0.0, (total - s) / total))
    base_rest, base_replay = run.base_terms()
    replay_gold = torch.tensor([int(r.label) for r in run.replay]) if run.replay and loss.replay_loss == "gold" else None
    judged_draws, replay_draws = _Draws(run.n_judged, rng), _Draws(len(run.replay), rng)
    bar = _bar(total, progress, "adapt: fine-tune")
    model.train()
    for _ in range(total):
        idx = judged_draws.take(batch_size)
        ridx = replay_draws.take(loss.replay_batch) if run.replay else []
        logits = run.logits(idx)
        logp = torch.log_softmax(logits, dim=1).gather(1, run.cols[idx].unsqueeze(1)).squeeze(1)
        log1m = torch.log1p(-logp.exp().clamp(max=1 - 1e-6))
        y = run.ys[idx]
        q = base_rest[idx]
        kept = (q.exp() * (q - run.others(logits, idx))).sum(dim=1).mean()
        step_loss = -(y * logp + (1 - y) * log1m).mean() + KEEP * kept
        if ridx:  # a forward of its own: replay pairs are short, padded to a judged batch's width they cost 3×
            rlogp = torch.log_softmax(run.logits([run.n_judged + i for i in ridx]), dim=1)  # texts: after the judged
            if replay_gold is not None:
                held = torch.nn.functional.nll_loss(rlogp, replay_gold[ridx])
            else:
                qb = base_replay[ridx]
                held = (qb.exp() * (qb - rlogp)).sum(dim=1).mean()
            step_loss = step_loss + loss.replay_weight * held
        step_loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        bar.update(1)
        bar.set_postfix(loss=f"{step_loss.item():.3f}")
    bar.close()
    model.eval()


def _save_tuned(run: _Tuning, work: Path, out: Path, export: bool) -> None:
    """The tuned weights into `out`: an ONNX export with its tokenizer, or (export=False) a torch state dict."""
    import torch

    if not export:
        torch.save(run.model.state_dict(), out / TUNED)
        return
    _export(run.model, run.tok, work, out)


def _export(model, tok, work: Path, out: Path) -> None:
    """`model` as `out`/model.onnx and `out`/tokenizer/ (the one exporter every artifact here goes through)."""
    from .export import export_onnx

    model.save_pretrained(str(work / "tuned"))
    tok.save_pretrained(str(work / "tuned"))
    fp32 = export_onnx(work / "tuned", work / "export")
    out.mkdir(parents=True, exist_ok=True)
    shutil.move(str(fp32), out / "model.onnx")
    shutil.rmtree(out / "tokenizer", ignore_errors=True)
    shutil.copytree(work / "export" / "tokenizer", out / "tokenizer")


def _write_tuned_calibration(out: Path, cal: dict, pairs: Sequence[JudgedPair], version: str | None,
                             adapt: dict) -> None:
    """calibration.json of a fine-tune: the base's temperature (and token limit), the version named after
    the pairs, and what it was trained on and how (`adapt`)."""
    from .export import write_calibration
    from .judged import pairs_sha1, target_counts

    digest = pairs_sha1(pairs)
    base_version = str(cal.get("version", "dialcheck-nli"))
    write_calibration(out, float(cal.get("temperature", 1.0)), version or f"{base_version}+adapt-{digest[:8]}",
                      **({"max_length": cal["max_length"]} if "max_length" in cal else {}),
                      adapt={"base_version": base_version, "pairs": len(pairs), "pairs_sha1": digest,
                             "targets": target_counts(pairs), **adapt})


def base_export(base_dir: str | Path, out_dir: str | Path) -> Path:
    """The base artifact re-exported by this build's exporter (same weights, same graph as
    `fine_tune` writes): what `interpolate` averages with when the shipped graph differs."""
    from .export import export_onnx, write_calibration

    base_dir, out = Path(base_dir), Path(out_dir)
    with tempfile.TemporaryDirectory(prefix="dialcheck-adapt-") as tmp:
        ckpt = _checkpoint(base_dir, Path(tmp))
        fp32 = export_onnx(ckpt, Path(tmp) / "export")
        out.mkdir(parents=True, exist_ok=True)
        shutil.move(str(fp32), out / "model.onnx")
        shutil.copytree(Path(tmp) / "export" / "tokenizer", out / "tokenizer", dirs_exist_ok=True)
    shutil.copy(base_dir / "calibration.json", out / "calibration.json")
    return out


def interpolate(base_dir: str | Path, tuned_dir: str | Path, weight: float, out_dir: str | Path,
                version: str | None = None) -> Path:
    """WiSE-FT: weight · tuned + (1 − weight) · base as one artifact in `out_dir` (tokenizer and
    temperature of the tuned one). The base graph must be the tuned one's export: when the shipped
    file differs (another exporter), pass `base_export(base)` instead."""
    from .soup import average_onnx

    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"weight must be in [0, 1], got {weight}")
    base_dir, tuned_dir, out = Path(base_dir), Path(tuned_dir), Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    average_onnx(tuned_dir / "model.onnx", base_dir / "model.onnx", weight, out / "model.onnx")
    if out.resolve() != tuned_dir.resolve():
        shutil.copytree(tuned_dir / "tokenizer", out / "tokenizer", dirs_exist_ok=True)
    write_mix_calibration(tuned_dir, out, weight, version)
    return out


def write_mix_calibration(tuned_dir: str | Path, out_dir: str | Path, weight: float, version: str | None = None,
                          **adapt) -> None:
    """calibration.json of a WiSE-FT mix: the fine-tune's, with the mix's weight (and, when given, its
    version and what else the run knows, `adapt`): the one place a mix's `adapt.weight` is written."""
    cal = json.loads((Path(tuned_dir) / "calibration.json").read_text())
    cal.setdefault("adapt", {}).update({"weight": float(weight), **adapt})
    if version:
        cal["version"] = version
    (Path(out_dir) / "calibration.json").write_text(json.dumps(cal, indent=1))


class TorchMixes:
    """A fine-tune written with `export=False`, scored in torch at WiSE-FT weights w · tuned +
    (1 − w) · base, in this process: no ONNX export, no averaged graph written and no session built
    per weight (what a cross-fitting fold model, only ever scored, cost most outside its training).
    `probs` is the runtime's: tokens as OnnxNLI cuts them, length-sorted chunks, softmax(logits / T)
    with the base temperature, columns (entailment, neutral, contradiction)."""

    def __init__(self, checkpoint: str | Path, tuned_dir: str | Path, batch_size: int = 32,
                 trunk: "Trunk | None" = None):
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        from workers.models.onnx_nli import MAX_LENGTH, read_calibration

        torch.set_num_threads(THREADS)
        self.tuned_dir = Path(tuned_dir)
        cal = read_calibration(self.tuned_dir)
        self.temperature = float(cal.get("temperature", 1.0))
        self.max_length = int(cal.get("max_length") or MAX_LENGTH)
        self.tok = AutoTokenizer.from_pretrained(str(checkpoint))
        self.model = AutoModelForSequenceClassification.from_pretrained(str(checkpoint)).float().eval()
        self.base = {k: v.clone() for k, v in self.model.state_dict().items()}
        self.tuned = torch.load(self.tuned_dir / TUNED, map_location="cpu")
        self.batch_size = batch_size
        # the layers a trunk runs are the base's in every mix (never trained): scored from its cache
        self.trunk = trunk if trunk is not None and all(
            torch.equal(self.tuned[k], v) for k, v in self.base.items() if k in trunk.keys(self.model)) else None

    def set_weight(self, w: float) -> None:
        if not 0.0 <= w <= 1.0:
            raise ValueError(f"weight must be in [0, 1], got {w}")
        self.model.load_state_dict({k: (w * self.tuned[k] + (1.0 - w) * b) if b.is_floating_point() else b
                                    for k, b in self.base.items()})

    def probs(self, w: float, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
        import torch

        from workers.models.nli_base import softmax

        n = len(premises)
        if not n:
            return np.zeros((0, 3))
        self.set_weight(float(w))
        lengths, batch_logits = self._batches(premises, hypotheses)
        order = sorted(range(n), key=lengths.__getitem__)
        logits = np.zeros((n, 3), np.float32)
        with torch.inference_mode():
            for s in range(0, n, self.batch_size):
                idx = order[s:s + self.batch_size]
                logits[idx] = batch_logits(idx).float().numpy()
        return np.asarray(softmax(logits, self.temperature), float)

    def _batches(self, premises: Sequence[str], hypotheses: Sequence[str]) -> tuple[list[int], Callable]:
        """Each pair's length in tokens and a function giving a batch's logits by pair index: from the
        trunk's cache when it runs this model's lower layers, else from the tokens."""
        if self.trunk is not None and self.trunk.max_length == self.max_length:
            self.trunk.add(premises, hypotheses)
            keys = list(zip(premises, hypotheses))
            return ([len(self.trunk.cache[k]) for k in keys],
                    lambda idx: self.trunk.head(self.model, [keys[i] for i in idx]))
        enc = self.tok(list(premises), list(hypotheses), truncation="longest_first", max_length=self.max_length)

        def from_tokens(idx: list[int]):
            batch = self.tok.pad({k: [enc[k][i] for i in idx] for k in ("input_ids", "token_type_ids",
                                                                          "attention_mask")}, return_tensors="pt")
            return self.model(**batch).logits

        return [len(ids) for ids in enc["input_ids"]], from_tokens

    def export(self, w: float, out_dir: str | Path, version: str | None = None, **adapt) -> Path:
        """The mix at `w` as an artifact (model.onnx, tokenizer/, calibration.json with the weight, and
        `version` and `adapt` when given): the one WiSE-FT path, for a fold's display and the model written."""
        out = Path(out_dir)
        self.set_weight(float(w))
        with tempfile.TemporaryDirectory(prefix="dialcheck-adapt-") as tmp:
            _export(self.model, self.tok, Path(tmp), out)
        write_mix_calibration(self.tuned_dir, out, w, version, **adapt)
        return out


def encoder_depth(checkpoint: str | Path) -> int:
    """The checkpoint's encoder layers (its config.json): what `train_layers` is counted against."""
    return int(json.loads((Path(checkpoint) / "config.json").read_text())["num_hidden_layers"])


def trunk_for(checkpoint: str | Path, base_dir: str | Path, train_layers: int | None = TRAIN_LAYERS) -> "Trunk | None":
    """The `Trunk` fine-tunes of `base_dir` with `train_layers` share (None when every layer trains):
    the checkpoint's depth less `train_layers`, at the base artifact's token limit."""
    from workers.models.onnx_nli import MAX_LENGTH, read_calibration

    if train_layers is None:
        return None
    frozen = encoder_depth(checkpoint) - int(train_layers)
    length = int(read_calibration(Path(base_dir)).get("max_length") or MAX_LENGTH)
    return Trunk(checkpoint, length, frozen) if frozen > 0 else None


def _layers(model):
    return model.base_model.encoder.layer


def _given():
    """A module standing in for the embeddings when the input is a trunk's output: hands it on."""
    import torch

    class Given(torch.nn.Module):
        def forward(self, inputs_embeds=None, **_):
            return inputs_embeds

    return Given()


class Trunk:
    """The output of a base model's embeddings and lowest `frozen` encoder layers for each pair,
    computed once and kept. Why: adaptation trains only the top layers (`TRAIN_LAYERS`), so what the
    layers below say about a pair never changes — not between epochs, not between the cross-fitting
    folds, not between WiSE-FT mixes (they average only what was trained). Running them once per
    pair instead of once per step and fold is most of a CPU fine-tune's cost saved. Dropout in those
    layers is off (they run in eval mode), as it is when the model serves."""

    def __init__(self, checkpoint: str | Path, max_length: int, frozen: int, batch_size: int = 32):
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.max_length, self.frozen, self.batch_size = int(max_length), int(frozen), batch_size
        self.tok = AutoTokenizer.from_pretrained(str(checkpoint))
        model = AutoModelForSequenceClassification.from_pretrained(str(checkpoint)).float().eval()
        self.bottom = model.base_model
        self.bottom.encoder.layer = torch.nn.ModuleList(list(_layers(model))[:self.frozen])
        self.bottom.pooler = None
        self.cache: dict[tuple[str, str], "torch.Tensor"] = {}  # (tokens, hidden), the pair's own length
        self.given = _given()

    def keys(self, model) -> set[str]:
        """State-dict names of what this trunk runs in `model` (embeddings and its layers)."""
        prefix = model.base_model_prefix
        own = [f"{prefix}.embeddings."] + [f"{prefix}.encoder.layer.{i}." for i in range(self.frozen)]
        return {k for k in model.state_dict() if any(k.startswith(o) for o in own)}

    def add(self, premises: Sequence[str], hypotheses: Sequence[str]) -> None:
        import torch

        todo = sorted({(p, h) for p, h in zip(premises, hypotheses)} - self.cache.keys())
        if not todo:
            return
        enc = self.tok([p for p, _ in todo], [h for _, h in todo], truncation="longest_first",
                       max_length=self.max_length)
        order = sorted(range(len(todo)), key=lambda i: len(enc["input_ids"][i]))
        with torch.inference_mode():
            for s in range(0, len(order), self.batch_size):
                idx = order[s:s + self.batch_size]
                batch = self.tok.pad({k: [enc[k][i] for i in idx] for k in ("input_ids", "token_type_ids",
                                                                              "attention_mask")}, return_tensors="pt")
                hidden = self.bottom(**batch).last_hidden_state
                for r, i in enumerate(idx):
                    self.cache[todo[i]] = hidden[r, :len(enc["input_ids"][i])].clone()

    def head(self, model, keys: Sequence[tuple[str, str]]):
        """`model`'s logits for the pairs `keys` (added before), its top layers run on the cached output."""
        import torch

        states = [self.cache[k] for k in keys]
        width = max(len(x) for x in states)
        hidden = torch.zeros(len(states), width, states[0].shape[1])
        att = torch.zeros(len(states), width, dtype=torch.long)
        for r, x in enumerate(states):
            hidden[r, :len(x)], att[r, :len(x)] = x, 1
        base = model.base_model
        layers, embeddings = base.encoder.layer, base.embeddings
        base.encoder.layer = torch.nn.ModuleList(list(layers)[self.frozen:])
        base.embeddings = self.given
        try:
            return model(inputs_embeds=hidden, attention_mask=att).logits
        finally:
            base.encoder.layer, base.embeddings = layers, embeddings


def _bar(total: int, progress: bool, desc: str):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, disable=not progress, leave=False, mininterval=2.0)
