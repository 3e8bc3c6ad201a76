"""Hard NOT-ENOUGH-INFO pairs and dialogue-style claims for NLI v3, built only from training sources.

Why: the shipped model calls silent or off-topic evidence "contradiction" (docs/method.md §6). The pairs here
teach "silent ≠ contradicted" with labels that are right by construction:
- same_page: a claim with another sentence of its own Wikipedia page that is not (a revision of)
  its evidence → neutral (SciFact/FEVER recipe; filtered with the current model, see `filter_pairs`);
- nearest_page: a claim with the most claim-like sentence of the nearest *other* page (TF-IDF over
  page text: a different entity of the same type), never naming the claim's subject → neutral;
- dialogue: hedged / first-person / chit-chat / pronoun versions of training claims, label kept.

Sources: VitaminC real + synthetic (pages: CC BY-SA 3.0), the same files `data.vitaminc` trains on.
Evaluation sets (DialFact testsmall, TRUE-DialFact, HybriDial, FoolMeTwice dev, WiCE dev, SNLI/ANLI)
are never read. One page in ten (stable hash) is held out of every builder: the silent-evidence
probe (`silent_probe_pairs`) is built the same way from those pages only and is never trained on.
"""
from __future__ import annotations

import hashlib
import json
import random
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from workers.jsonl import read_jsonl
from workers.text import PAIR_OVERLAP_STOP, WORD

from .data import NLIPair
from .labels import CONTRADICTION, ENTAILMENT, NEUTRAL, label_id

PAGE_SOURCES = ("vitaminc_real", "vitaminc_synthetic")
# Files these builders may read; tests check that no evaluation file is among them.
EVALUATION_FILES = ("dialfact/", "hybridial/", "foolmetwice/", "wice/", "esnli_snli_devtest", "anli")
PROBE_EVERY = 10
_STOP = PAIR_OVERLAP_STOP  # workers/text.py
_TOKEN = WORD


@dataclass(frozen=True)
class PageClaim:
    page: str
    claim: str
    evidence: str
    label: int
    source: str


def source_files(root: str | Path) -> list[Path]:
    root = Path(root)
    return [root / f"nli/vitaminc_static/static/unz/{name}/test.jsonl" for name in PAGE_SOURCES]


def clean_title(page: str) -> str:
    """'2 Hearts -LRB-Kylie Minogue song-RRB-' → '2 Hearts (Kylie Minogue song)'."""
    return page.replace("_", " ").replace("-LRB-", "(").replace("-RRB-", ")").strip()


def clean_claim(text: str) -> str:
    """VitaminC/FEVER claims are tokenised ('Westlife made 23 sales .'): undo the spacing."""
    t = re.sub(r"\s+([.,;:!?'])", r"\1", text.strip())
    t = t.replace("( ", "(").replace(" )", ")").replace("`` ", '"').replace(" ''", '"')
    return re.sub(r"\s+", " ", t).strip()


def tokens(text: str) -> set[str]:
    return {t for t in _TOKEN.findall(text.lower()) if t not in _STOP}


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / max(1, len(a | b))


def is_probe_page(page: str) -> bool:
    """Stable split: one page in PROBE_EVERY is held out for the silent-evidence probe."""
    h = hashlib.blake2b(clean_title(page).lower().encode(), digest_size=4).digest()
    return int.from_bytes(h, "little") % PROBE_EVERY == 0


def page_claims(root: str | Path) -> list[PageClaim]:
    out = []
    for name, path in zip(PAGE_SOURCES, source_files(root)):
        for r in read_jsonl(path):
            lab = label_id(r.get("label"))
            if lab is None or not r.get("page") or not r.get("claim") or not r.get("evidence"):
                continue
            out.append(PageClaim(r["page"], r["claim"].strip(), r["evidence"].strip(), lab, name))
    return out


def _by_page(records: Iterable[PageClaim]) -> tuple[dict[str, list[str]], dict[tuple[str, str], set[str]]]:
    """Distinct sentences per page, and every evidence sentence each (page, claim) was paired with."""
    sents: dict[str, list[str]] = defaultdict(list)
    own: dict[tuple[str, str], set[str]] = defaultdict(set)
    for r in records:
        if r.evidence not in sents[r.page]:
            sents[r.page].append(r.evidence)
        own[(r.page, r.claim)].add(r.evidence)
    return sents, own


def _silent(claim: str, sentence: str, own_evidence: Iterable[str], max_own: float = 0.3,
            max_claim: float = 0.4) -> bool:
    """Construction filter: the sentence is neither a revision of the claim's own evidence (VitaminC
    pages hold several revisions of one sentence) nor a near-paraphrase of the claim."""
    s = tokens(sentence)
    if jaccard(s, tokens(claim)) > max_claim:
        return False
    return all(jaccard(s, tokens(e)) <= max_own for e in own_evidence)


def same_page_pairs(records: Sequence[PageClaim], rng: random.Random, per_claim: int = 1,
                    per_page: int = 8) -> list[NLIPair]:
    """A claim with another sentence of its own page that does not bear on it → neutral."""
    sents, own = _by_page(records)
    by_page: dict[str, list[str]] = defaultdict(list)
    for page, claim in own:
        by_page[page].append(claim)
    out = []
    for page in sorted(by_page):
        claims = sorted(by_page[page])
        rng.shuffle(claims)
        n_page = 0
        for claim in claims:
            if n_page >= per_page:
                break
            cands = [s for s in sents[page] if s not in own[(page, claim)] and _silent(claim, s, own[(page, claim)])]
            for s in rng.sample(cands, min(per_claim, len(cands))):
                out.append(NLIPair(clean_claim(s), clean_claim(claim), NEUTRAL, "hard_same_page"))
                n_page += 1
    return out


def _subject_words(title: str) -> set[str]:
    return {t for t in tokens(re.sub(r"\(.*?\)", " ", title)) if len(t) > 2}


def nearest_page_pairs(records: Sequence[PageClaim], rng: random.Random, per_page: int = 4,
                       random_page: bool = False) -> list[NLIPair]:
    """A claim with the most claim-like sentence of the nearest other page (TF-IDF over the pages'
    text: same type, different entity) → neutral. The sentence must not name the claim's subject
    (no word of its title that the other title lacks), and a page whose title contains the other's
    (a song and its singer) is never a neighbour. `random_page`: an unrelated page instead
    (the page-swap probe: a claim beside an unrelated page)."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.neighbors import NearestNeighbors

    sents, own = _by_page(records)
    pages = sorted(sents)
    if len(pages) < 3:
        return []
    vec = TfidfVectorizer(stop_words="english", sublinear_tf=True, min_df=1)
    page_mat = vec.fit_transform([clean_title(p) + " " + " ".join(sents[p]) for p in pages])
    k = min(6, len(pages))
    _, nbrs = NearestNeighbors(n_neighbors=k, metric="cosine").fit(page_mat).kneighbors(page_mat)
    claims_of: dict[str, list[str]] = defaultdict(list)
    for page, claim in own:
        claims_of[page].append(claim)
    # each page's sentences and claims TF-IDF-transformed once, not once per claim (the rows are the
    # same: the transform is row by row); this loop was most of a pair build's time
    sent_mats: dict[str, object] = {}
    out = []
    for i, page in enumerate(pages):
        subj = _subject_words(clean_title(page))
        claims = sorted(claims_of[page])
        rng.shuffle(claims)
        if random_page:
            others = [p for p in rng.sample(pages, min(8, len(pages))) if p != page]
        else:
            others = [pages[j] for j in nbrs[i][1:]]
        others = [o for o in others if not (subj <= _subject_words(clean_title(o)) or
                                            _subject_words(clean_title(o)) <= subj)]
        if not others:
            continue
        claim_mat = None
        for n, claim in enumerate(claims[:per_page]):
            other = others[0] if not random_page else rng.choice(others)
            extra = subj - _subject_words(clean_title(other))
            rows = [j for j, s in enumerate(sents[other]) if not (tokens(s) & extra)]
            cands = [sents[other][j] for j in rows]
            if not cands:
                continue
            if random_page:  # two sentences of the unrelated page, like the page-swap probe
                s = " ".join(clean_claim(x) for x in rng.sample(cands, min(2, len(cands))))
            else:
                if other not in sent_mats:
                    sent_mats[other] = vec.transform(sents[other])
                if claim_mat is None:
                    claim_mat = vec.transform(claims[:per_page])
                sims = (sent_mats[other][rows] @ claim_mat[n].T).toarray().ravel()
                s = cands[int(np.argmax(sims))]
            out.append(NLIPair(clean_claim(s), clean_claim(claim), NEUTRAL,
                               "hard_random_page" if random_page else "hard_nearest_page"))
    return out


_HEDGES = ("I think {c}.", "I believe {c}.", "Pretty sure {c}.", "If I remember right, {c}.",
           "I'm not 100% sure, but {c}.")
_FIRST_PERSON = ("I read that {c}.", "I heard that {c}.", "I saw somewhere that {c}.",
                 "My friend told me that {c}.", "I learned the other day that {c}.")
_CHITCHAT = ("Oh cool, {c}, right?", "Yeah, {c}.", "Haha yes! {c}.", "Did you know that {c}?",
             "Wow, {c}, that's interesting!", "Oh nice. {c}.")
_LOWER_FIRST = {"the", "a", "an", "there", "in", "it", "on", "at", "during", "after", "before", "some",
                "many", "most", "more", "less", "fewer", "over", "under", "as", "by", "from", "only", "no"}


def _inline(claim: str) -> str:
    c = clean_claim(claim).rstrip(" .!?")
    first = c.split(" ", 1)[0]
    return c[0].lower() + c[1:] if first.lower() in _LOWER_FIRST else c


def _pronoun(page_sents: Sequence[str]) -> str:
    text = " " + " ".join(page_sents).lower() + " "
    he = sum(text.count(w) for w in (" he ", " his ", " him "))
    she = sum(text.count(w) for w in (" she ", " her "))
    if he >= 2 and he > 2 * she:
        return "he"
    if she >= 2 and she > 2 * he:
        return "she"
    return "it" if he + she == 0 else ""


def dialogue_pairs(records: Sequence[PageClaim], rng: random.Random, n: int) -> list[NLIPair]:
    """Chat-style versions of (evidence, claim, label) pairs, label kept: hedges, first-person and
    chit-chat wrappers, and the page subject replaced by a pronoun (he/she/it from the page)."""
    sents, _ = _by_page(records)
    recs = list(records)
    rng.shuffle(recs)
    out = []
    for r in recs:
        if len(out) >= n:
            break
        kind = rng.choice(("hedge", "first_person", "chitchat", "pronoun"))
        c = _inline(r.claim)
        if kind == "pronoun":
            title = re.sub(r"\s*\(.*?\)", "", clean_title(r.page))
            pron = _pronoun(sents[r.page])
            if not pron or not c.startswith(title + " ") or pron == "it" and c.startswith(title + " 's"):
                continue
            hyp = (pron.capitalize() + c[len(title):]).replace(" 's ", "'s ") + "."
        else:
            tmpl = rng.choice({"hedge": _HEDGES, "first_person": _FIRST_PERSON, "chitchat": _CHITCHAT}[kind])
            hyp = tmpl.format(c=c)
        out.append(NLIPair(clean_claim(r.evidence), hyp, r.label, f"dialogue_{kind}"))
    return out


# A whole number as written ("1,075,187", "7.4", "1994"), not part of a word ("a3") or a longer number.
_NUMBER_START, _NUMBER_END = r"(?<![\w.,])", r"(?![\w,]|\.\d)"
_NUMBER = re.compile(_NUMBER_START + r"(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)" + _NUMBER_END)
# A changed value keeps a comparative or range claim true ("more than 5" with 7 in the evidence), so
# claims with these words are never value-swapped.
_COMPARATIVE = set("more less fewer over under least most than above below about around nearly almost "
                   "approximately roughly exceed exceeded exceeds before after since until by between up "
                   "within top only some several".split())


def _numbers(text: str) -> list[str]:
    return _NUMBER.findall(text)


def _is_year(value: str) -> bool:
    return value.isdigit() and len(value) == 4 and 1000 <= int(value) <= 2100


def _other_value(value: str, rng: random.Random) -> str | None:
    """A different value of the same kind: a year moves by 1–15 years, a count or amount by a factor
    or a step, keeping its format (thousands commas, decimals)."""
    plain = value.replace(",", "")
    if _is_year(plain):
        return str(int(plain) + rng.choice([-1, 1]) * rng.randint(1, 15))
    try:
        x = float(plain)
    except ValueError:
        return None
    if "." in plain:
        decimals = len(plain.split(".")[1])
        y = round(x * rng.choice((0.5, 0.7, 1.3, 1.6, 2.0)) + rng.choice((-1, 1)) * 10 ** -decimals, decimals)
        out = f"{y:.{decimals}f}"
    elif x < 20:
        y = int(x) + rng.choice([-1, 1]) * rng.randint(1, 4)
        if y < 0:
            y = int(x) + rng.randint(1, 4)
        out = str(y)
    else:
        y = int(round(x * rng.choice((0.4, 0.6, 0.75, 1.3, 1.5, 2.5))))
        out = f"{y:,}" if "," in value else str(y)
    return out if out.replace(",", "") != plain else None


def value_swap_pairs(records: Sequence[PageClaim], rng: random.Random, n: int) -> list[NLIPair]:
    """A supported claim whose number or year, also stated in its evidence, is changed → contradiction.

    The conflict is in the same slot by construction: the half of the lesson "a different date in the
    same slot refutes" that `same_page_number_pairs` pairs with "a different date elsewhere is silent"."""
    recs = [r for r in records if r.label == ENTAILMENT]
    rng.shuffle(recs)
    out = []
    for r in recs:
        if len(out) >= n:
            break
        claim = clean_claim(r.claim)
        if set(claim.lower().replace(",", " ").split()) & _COMPARATIVE:
            continue
        evidence_values = set(_numbers(clean_claim(r.evidence)))
        values = [v for v in _numbers(claim) if v in evidence_values]
        if not values:
            continue
        value = rng.choice(values)
        other = _other_value(value, rng)
        if other is None or other in evidence_values:
            continue
        swapped = re.sub(_NUMBER_START + re.escape(value) + _NUMBER_END, other, claim, count=1)
        out.append(NLIPair(clean_claim(r.evidence), swapped, CONTRADICTION, "contrast_value_swap"))
    return out


def same_page_number_pairs(records: Sequence[PageClaim], rng: random.Random, n: int) -> list[NLIPair]:
    """A claim stating a number or year with another sentence of its own page that states a different
    one (a different fact about the same subject, e.g. "renamed in 1996" / "founded in 1984") and is
    neither the claim's evidence nor a revision of it → neutral. The silent half of the contrast with
    `value_swap_pairs`; filtered for entailment like every hard_ pair."""
    sents, own = _by_page(records)
    keys = sorted(own)
    rng.shuffle(keys)
    out = []
    for page, claim in keys:
        if len(out) >= n:
            break
        claim_values = set(_numbers(clean_claim(claim)))
        if not claim_values:
            continue
        years = any(_is_year(v) for v in claim_values)
        cands = []
        for s in sents[page]:
            if s in own[(page, claim)] or not _silent(claim, s, own[(page, claim)]):
                continue
            values = set(_numbers(clean_claim(s)))
            if values and not values & claim_values and any(_is_year(v) == years for v in values):
                cands.append(s)
        if cands:
            out.append(NLIPair(clean_claim(rng.choice(cands)), clean_claim(claim), NEUTRAL, "hard_same_page_number"))
    return out


def chat_wrap(pairs: Sequence[NLIPair], rng: random.Random, share: float) -> list[NLIPair]:
    """Put `share` of the hypotheses in a hedge, first-person or chit-chat wrapper (label kept),
    so the contrast is learnt on dialogue-style claims too."""
    out = []
    for p in pairs:
        if rng.random() < share:
            tmpl = rng.choice(_HEDGES + _FIRST_PERSON + _CHITCHAT)
            p = NLIPair(p.premise, tmpl.format(c=_inline(p.hypothesis)), p.label, p.source)
        out.append(p)
    return out


def filter_pairs(pairs: list[NLIPair], model, max_entail: float = 0.6) -> tuple[list[NLIPair], int]:
    """Drop neutral-by-construction pairs the current model calls entailment with confidence
    (a 'non-evidence' sentence that really supports the claim). Returns (kept, dropped)."""
    if not pairs:
        return pairs, 0
    probs = model.predict([p.premise for p in pairs], [p.hypothesis for p in pairs])
    keep = probs[:, ENTAILMENT] < max_entail
    return [p for p, k in zip(pairs, keep) if k], int((~keep).sum())


def silent_probe_pairs(root: str | Path, per_kind: int = 400, seed: int = 7) -> list[NLIPair]:
    """The silent-evidence probe: same_page, nearest_page and random_page pairs (all neutral by
    construction) from the held-out pages only. No model filter, so every model sees the same set."""
    rng = random.Random(seed)
    recs = [r for r in page_claims(root) if is_probe_page(r.page)]
    out = []
    for pairs in (same_page_pairs(recs, rng, per_page=3), nearest_page_pairs(recs, rng, per_page=2),
                  nearest_page_pairs(recs, rng, per_page=2, random_page=True)):
        rng.shuffle(pairs)
        out.extend(pairs[:per_kind])
    return out


def page_swap_probe_pairs(root: str | Path, n: int = 400, seed: int = 11) -> list[NLIPair]:
    """Evaluation only (FoolMeTwice dev is an evaluation set, never a source of hard pairs): each
    claim with two retrieved sentences of another, unrelated Wikipedia page, like the
    page-swap probe on FoolMeTwice test. Neutral by construction; a different domain and claim
    style from the VitaminC-built probe, so it checks that the lesson transfers."""
    rng = random.Random(seed)
    rows = [r for r in read_jsonl(Path(root) / "foolmetwice" / "dev.jsonl") if r.get("wikipedia_page")]
    sents: dict[str, list[str]] = defaultdict(list)
    for r in rows:
        for e in r.get("retrieved_evidence", []) + r.get("gold_evidence", []):
            if e.get("text") and e["text"] not in sents[r["wikipedia_page"]]:
                sents[r["wikipedia_page"]].append(e["text"])
    pages = sorted(sents)
    out = []
    for r in rng.sample(rows, min(n, len(rows))):
        subj = _subject_words(clean_title(r["wikipedia_page"]))
        for _ in range(5):
            other = rng.choice(pages)
            cands = [x for x in sents[other] if not tokens(x) & subj]
            if other != r["wikipedia_page"] and len(cands) >= 2:
                out.append(NLIPair(" ".join(rng.sample(cands, 2)), r["text"].strip(), NEUTRAL, "fmt_page_swap"))
                break
    return out


def silent_probe(model, pairs: Sequence[NLIPair], threshold: float = 0.55) -> dict:
    """False-contradiction rate on silent pairs: share called contradiction by argmax, and share
    with calibrated P(contradiction) ≥ threshold; overall and per kind (source)."""
    probs = model.predict([p.premise for p in pairs], [p.hypothesis for p in pairs])
    kinds = np.array([p.source for p in pairs])

    def rates(m: np.ndarray) -> dict:
        p = probs[m]
        return {"pairs": int(m.sum()),
                "false_contradiction_argmax": round(float((p.argmax(1) == CONTRADICTION).mean()), 4),
                f"false_contradiction_p{int(threshold * 100)}": round(float((p[:, CONTRADICTION] >= threshold).mean()), 4),
                "neutral_argmax": round(float((p.argmax(1) == NEUTRAL).mean()), 4)}

    out = rates(np.ones(len(pairs), bool)) if len(pairs) else {"pairs": 0}
    out["by_kind"] = {k: rates(kinds == k) for k in sorted(set(kinds))}
    return out


def write_pairs(path: str | Path, pairs: Iterable[NLIPair]) -> int:
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for p in pairs:
            f.write(json.dumps({"premise": p.premise, "hypothesis": p.hypothesis, "label": p.label,
                                "source": p.source}) + "\n")
            n += 1
    return n


def read_pairs(path: str | Path) -> list[NLIPair]:
    return [NLIPair(r["premise"], r["hypothesis"], int(r["label"]), r["source"]) for r in read_jsonl(path)]



REPLAY_EXCLUDED = ("foolmetwice", "wice")  # evaluation sets of the yardstick: not replayed in v3
SAME_EVENT_SOURCES = ("cad_snli", "mpe")  # SNLI-convention captions: both sentences assumed one scene


def same_event_contradiction(p: NLIPair) -> bool:
    """An SNLI-convention 'contradiction' whose hypothesis shares no content word with the premise
    (e.g. 'A man inspects a uniform' / 'The man is sleeping'): contradiction only under the
    same-event assumption, i.e. the 'unrelated ⇒ contradiction' lesson v3 must unlearn. Not replayed."""
    return p.source in SAME_EVENT_SOURCES and p.label == CONTRADICTION and not (tokens(p.premise) & tokens(p.hypothesis))
