"""The NLI training files: hard pairs (lab/nli/hard_pairs.py), attribution pairs
(lab/nli/attribution_pairs.py) and a replay sample of the original training pairs, put together.
Kept apart from both builders so neither imports the other (tests/test_layers.py: no circles)."""
from __future__ import annotations

import random
from pathlib import Path

from .attribution_pairs import attribution_pairs
from .data import NLIPair
from .hard_pairs import (REPLAY_EXCLUDED, chat_wrap, dialogue_pairs, filter_pairs, is_probe_page, nearest_page_pairs,
                         page_claims, same_event_contradiction, same_page_number_pairs, same_page_pairs,
                         value_swap_pairs, write_pairs)


def build_hard_pairs(root: str | Path, n_same: int, n_nearest: int, n_dialogue: int, seed: int = 13,
                     n_swaps: int = 0, n_number: int = 0, n_extensions: int = 0, n_slot_swaps: int = 0,
                     n_removals: int = 0) -> list[NLIPair]:
    """Training pairs from the non-probe pages only (unfiltered; see `filter_pairs`). `n_swaps` value-swap
    contradictions and `n_number` same-page different-number neutrals, 30 % of them chat-wrapped.
    `n_extensions` / `n_slot_swaps` / `n_removals`: the attribution pairs of `attribution_pairs`,
    drawn from their own rng so that every other pair is the same with and without them."""
    rng = random.Random(seed)
    recs = [r for r in page_claims(root) if not is_probe_page(r.page)]
    same = same_page_pairs(recs, rng)
    near = nearest_page_pairs(recs, rng)
    rng.shuffle(same)
    rng.shuffle(near)
    dia = dialogue_pairs(recs, rng, n_dialogue)
    contrast = []
    if n_swaps or n_number:  # only when asked: the builders draw from rng, and v3's file must rebuild unchanged
        contrast = chat_wrap(value_swap_pairs(recs, rng, n_swaps) + same_page_number_pairs(recs, rng, n_number),
                             rng, share=0.3)
    attribution = []
    if n_extensions or n_slot_swaps or n_removals:
        attribution = attribution_pairs(recs, random.Random(seed * 1000 + 29), n_extensions, n_slot_swaps, n_removals)
    return same[:n_same] + near[:n_nearest] + dia + contrast + attribution


def build_training_file(root: str | Path, out: str | Path, filter_model=None, n_same: int = 6000,
                        n_nearest: int = 6000, n_dialogue: int = 6000, n_replay: int = 12000,
                        seed: int = 13, n_swaps: int = 0, n_number: int = 0, n_extensions: int = 0,
                        n_slot_swaps: int = 0, n_removals: int = 0) -> dict:
    """Hard pairs (filtered with `filter_model`) + a replay sample of the original training pairs
    (so the model does not forget), shuffled, written as JSONL. Returns the counts per source."""
    from collections import Counter

    from .data import training_pairs

    rng = random.Random(seed)
    hard = build_hard_pairs(root, n_same, n_nearest, n_dialogue, seed, n_swaps, n_number,
                            n_extensions, n_slot_swaps, n_removals)
    dropped = 0
    if filter_model is not None:
        neutral = [p for p in hard if p.source.startswith("hard_")]
        kept, dropped = filter_pairs(neutral, filter_model)
        hard = kept + [p for p in hard if not p.source.startswith("hard_")]
    train, _, _ = training_pairs(root)
    probe_claims = {r.claim for r in page_claims(root) if is_probe_page(r.page)}
    pool = [p for p in train if p.source not in REPLAY_EXCLUDED and p.hypothesis not in probe_claims
            and not same_event_contradiction(p)]
    replay = rng.sample(pool, min(n_replay, len(pool)))
    pairs = hard + replay
    rng.shuffle(pairs)
    n = write_pairs(out, pairs)
    counts = Counter(p.source for p in hard)
    return {"pairs": n, "hard_and_dialogue": dict(sorted(counts.items())), "dropped_by_entailment_filter": dropped,
            "replay": len(replay), "replay_by_source": dict(sorted(Counter(p.source for p in replay).items())),
            "replay_excluded": list(REPLAY_EXCLUDED)}
