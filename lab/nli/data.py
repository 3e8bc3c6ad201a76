"""Training and evaluation pairs read straight from ../shared/data (never copied into the repo).

Every training source is listed in TRAIN_SOURCES with its license; sources with non-commercial or
LDC-restricted licenses, and the benchmark splits we evaluate on (SNLI dev/test, ANLI dev,
TRUE-DialFact, DialFact testsmall), are never read for training.
"""
from __future__ import annotations

import csv
import glob
import hashlib
import io
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from workers.jsonl import read_jsonl
from .labels import label_id

csv.field_size_limit(10**9)


@dataclass(frozen=True)
class NLIPair:
    premise: str
    hypothesis: str
    label: int
    source: str




def _tsv(path: str | Path, delim: str = "\t", enc: str = "utf-8-sig") -> Iterator[dict]:
    with open(path, encoding=enc, newline="", errors="replace") as f:
        quoting = csv.QUOTE_NONE if delim == "\t" else csv.QUOTE_MINIMAL
        yield from csv.DictReader(f, delimiter=delim, quoting=quoting)


def _pair(premise: str, hypothesis: str, raw_label: str | None, source: str) -> NLIPair | None:
    lab = label_id(raw_label)
    premise, hypothesis = (premise or "").strip(), (hypothesis or "").strip()
    if lab is None or not premise or not hypothesis:
        return None
    return NLIPair(premise, hypothesis, lab, source)


def lingnli(root: Path) -> Iterator[NLIPair]:
    for p in sorted(glob.glob(f"{root}/nli/lingnli/NLI_data/*/*.jsonl")):
        for r in read_jsonl(p):
            yield _pair(r["premise"], r["hypothesis"], r["label"], "lingnli")


def vitaminc(root: Path) -> Iterator[NLIPair]:
    # The 'anli' folder of this archive is ANLI (CC BY-NC): excluded.
    for name in ("vitaminc_real", "vitaminc_synthetic", "fever_symmetric", "fever_adversarial", "fever_triggers"):
        for p in sorted(glob.glob(f"{root}/nli/vitaminc_static/static/unz/{name}/*.jsonl")):
            for r in read_jsonl(p):
                yield _pair(r.get("evidence", ""), r.get("claim", ""), r.get("label") or r.get("gold_label"), name)


def cad_snli(root: Path) -> Iterator[NLIPair]:
    for sp in ("train", "dev", "test"):
        for r in _tsv(f"{root}/nli/cad_snli/NLI/all_combined/{sp}.tsv"):
            yield _pair(r["sentence1"], r["sentence2"], r["gold_label"], "cad_snli")


def conjnli(root: Path) -> Iterator[NLIPair]:
    for r in _tsv(f"{root}/nli/conjnli/data/NLI/adversarial_train_15k.tsv"):
        yield _pair(r["Premise"], r["Hypothesis"], r["Label"], "conjnli")


def dialogue_nli(root: Path) -> Iterator[NLIPair]:
    with open(f"{root}/nli/dialogue_nli_gu/data/compiled/data.csv", encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) >= 3:
                yield _pair(parts[0], parts[1], parts[-1], "dialogue_nli")


def mpe(root: Path) -> Iterator[NLIPair]:
    for sp in ("train", "dev", "test"):
        for r in _tsv(f"{root}/nli/mpe/data/MPE/mpe_{sp}.txt"):
            premises = [r[f"premise{i}"].split("/", 1)[-1] for i in range(1, 5)]
            yield _pair(" ".join(premises), r["hypothesis"], r["gold_label"], "mpe")


def breaking_nli(root: Path) -> Iterator[NLIPair]:
    with zipfile.ZipFile(f"{root}/nli/breaking_nli/breaking_nli_dataset.zip") as z, \
            z.open("data/dataset.jsonl") as member:
        for r in read_jsonl(io.TextIOWrapper(member, encoding="utf-8")):
            yield _pair(r["sentence1"], r["sentence2"], r["gold_label"], "breaking_nli")


def semi_automatic_wiki(root: Path) -> Iterator[NLIPair]:
    # news subsets are LDC-restricted: only the wiki subsets are read.
    for p in sorted(glob.glob(f"{root}/nli/semi_automatic_nli/data/*_wiki/*.jsonl")):
        for r in read_jsonl(p):
            yield _pair(r["premise"], r["hypothesis"], r["label"], "semi_automatic_wiki")


def climate_fever(root: Path) -> Iterator[NLIPair]:
    for r in read_jsonl(f"{root}/nli/climate_fever/dataset/climate-fever.jsonl"):
        for e in r["evidences"]:
            yield _pair(e["evidence"], r["claim"], e["evidence_label"].replace("_", " "), "climate_fever")


def healthver(root: Path) -> Iterator[NLIPair]:
    for sp in ("dev", "test"):
        for r in _tsv(f"{root}/nli/healthver/data/healthver_{sp}.csv", ","):
            yield _pair(r["evidence"], r["claim"], r["label"], "healthver")


def folio(root: Path) -> Iterator[NLIPair]:
    for p in sorted(glob.glob(f"{root}/nli/folio/data/v0.0/*.jsonl")):
        for r in read_jsonl(p):
            yield _pair(" ".join(r["premises"]), r["conclusion"], r["label"], "folio")


def foolmetwice(root: Path) -> Iterator[NLIPair]:
    for r in read_jsonl(f"{root}/foolmetwice/dev.jsonl"):
        ev = " ".join(e["text"] for e in r.get("gold_evidence", []))
        yield _pair(ev, r["text"], r["label"], "foolmetwice")


def wice(root: Path) -> Iterator[NLIPair]:
    """Supported claims with their supporting sentences (entailment); unsupported ones with the
    sentences the annotators marked, which do not support them (neutral). Partial support skipped."""
    for r in read_jsonl(f"{root}/wice/dev.jsonl"):
        sents = r["evidence"]
        idx = sorted({i for group in r.get("supporting_sentences", []) for i in group})
        if r["label"] == "supported" and idx:
            yield _pair(" ".join(sents[i] for i in idx if i < len(sents)), r["claim"], "entailment", "wice")
        elif r["label"] == "not_supported":
            yield _pair(" ".join(sents[1:6]), r["claim"], "neutral", "wice")


@dataclass(frozen=True)
class Source:
    name: str
    license: str
    reader: Callable[[Path], Iterator[NLIPair]]
    note: str = ""


TRAIN_SOURCES: tuple[Source, ...] = (
    Source("lingnli", "not stated", lingnli,
           "released publicly by the authors for NLI research with no restriction stated; MNLI-style; judged usable"),
    Source("vitaminc+fever", "CC BY-SA 3.0", vitaminc, "ANLI part of the archive excluded (CC BY-NC)"),
    Source("cad_snli", "Apache-2.0", cad_snli),
    Source("conjnli", "MIT", conjnli),
    Source("dialogue_nli", "MIT", dialogue_nli),
    Source("mpe", "not stated", mpe, "Flickr30k captions like SNLI; judged usable"),
    Source("breaking_nli", "CC BY-SA 4.0", breaking_nli),
    Source("semi_automatic_wiki", "CC BY-SA", semi_automatic_wiki, "news subsets excluded (LDC-restricted)"),
    Source("climate_fever", "not stated", climate_fever, "Wikipedia sentences; judged usable"),
    Source("healthver", "not stated", healthver, "judged usable"),
    Source("folio", "CC BY-SA 4.0", folio),
    Source("foolmetwice", "Apache-2.0 (Wikipedia text CC BY-SA)", foolmetwice, "dev claims with gold evidence"),
    Source("wice", "ODC-BY", wice, "dev claims; supported → E, not_supported → N"),
)

EXCLUDED_SOURCES = {
    "snli dev/test": "evaluation only (snli_test_accuracy)",
    "anli dev": "CC BY-NC; evaluation only (anli_dev_accuracy)",
    "true_dialfact_valid": "evaluation only (true_dialfact_roc_auc)",
    "dialfact testsmall": "pipeline evaluation set",
    "imppres, sick, control, logiqa2nli": "non-commercial licenses",
    "semi_automatic_nli news": "LDC-restricted",
    "taxinli, negation_nli, docnli MNLI, glue rte": "MNLI/RTE benchmark-derived or research-only terms",
    "logicnli, nope, covidfact, med, docnli fever": "two-class or synthetic-logic sets, not used",
}


def is_validation(pair: NLIPair, every: int = 20) -> bool:
    """Stable hash split: 1 in `every` pairs is held out for validation / temperature fitting."""
    h = hashlib.blake2b(f"{pair.premise}\x00{pair.hypothesis}".encode(), digest_size=4).digest()
    return int.from_bytes(h, "little") % every == 0


def training_pairs(root: str | Path) -> tuple[list[NLIPair], list[NLIPair], dict[str, int]]:
    """All licensed pairs, deduplicated, split into (train, validation, counts per source)."""
    root = Path(root)
    seen: set[tuple[str, str]] = set()
    train: list[NLIPair] = []
    valid: list[NLIPair] = []
    counts: dict[str, int] = {}
    for src in TRAIN_SOURCES:
        n = 0
        for pair in src.reader(root):
            if pair is None or (pair.premise, pair.hypothesis) in seen:
                continue
            seen.add((pair.premise, pair.hypothesis))
            (valid if is_validation(pair) else train).append(pair)
            n += 1
        counts[src.name] = n
    return train, valid, counts


# ---- evaluation sets (never trained on) -------------------------------------------------------

SNLI_DIR = "nli/esnli_snli_devtest/dataset/eSNLI"  # SNLI dev and test (e-SNLI's copy): evaluation only


def snli_sentences(root: str | Path, split: str) -> list[tuple[str, str]]:
    """Every (premise, hypothesis) line pair of SNLI `split` ("dev", "test"), stripped, labelled or
    not: what must never be trained on (lab/nli/adapt.py keeps replay off them). OSError when absent."""
    d = Path(root) / SNLI_DIR
    s1 = (d / f"s1.{split}").read_text().split("\n")
    s2 = (d / f"s2.{split}").read_text().split("\n")
    return [(a.strip(), b.strip()) for a, b in zip(s1, s2)]


def snli_test(root: str | Path) -> list[NLIPair]:
    d = Path(root) / SNLI_DIR
    s1 = [x for x in (d / "s1.test").read_text().split("\n") if x]
    s2 = [x for x in (d / "s2.test").read_text().split("\n") if x]
    lb = [x for x in (d / "labels.test").read_text().split("\n") if x]
    return [p for p in (_pair(a, b, c, "snli_test") for a, b, c in zip(s1, s2, lb)) if p]


def anli_dev(root: str | Path) -> list[NLIPair]:
    out: list[NLIPair] = []
    for p in sorted(glob.glob(f"{root}/nli/anli_dev_analysis/anlizinganli/anli_annot_v0.2/ANLI_analysis_r*_dev.csv")):
        for r in _tsv(p, ","):
            pr = _pair(r["context"], r["statement"], r["gold_label"], "anli_dev")
            if pr:
                out.append(pr)
    return out


def true_dialfact(root: str | Path) -> list[tuple[str, str, int]]:
    """(grounding, response, binary label) as in the TRUE benchmark."""
    rows = []
    for r in _tsv(Path(root) / "dialfact/true_dialfact_valid.csv", ","):
        rows.append((r["grounding"], r["generated_text"], int(r["label"])))
    return rows
