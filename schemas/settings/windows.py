"""The verifier's evidence windows: how many, read in what order, and what the NLI reads with them."""
from __future__ import annotations

from schemas.settings.base import Section, env


class WindowSettings(Section):
    hypothesis_context_turns: int = env("HYP_CONTEXT_TURNS", 0,
                                         "Context turns prepended to the claim as the verifier's NLI hypothesis (0: the "
                                         "claim alone).",
                                         ge=0, le=50)
    max_windows: int = env("MAX_WINDOWS", 24, "Windows kept by the lexical pre-score.", ge=1, le=1000)
    max_window_words: int = env("MAX_WINDOW_WORDS", 0,
                                "A passage sentence longer than this many words is read in pieces of it (the NLI reads "
                                "about 256 tokens of premise and hypothesis and cuts the rest without saying so); 0 "
                                "(default): sentences whole, as measured. 120 read to the end of unpunctuated text, but "
                                "left out (tune decision --lodo, same tree) it cost WiCE 0.78 macro-F1 and 4.7 points of "
                                "shown precision, TRUE-DialFact 2.6 and HybriDial 1.6 points of shown precision "
                                "(docs/results.md).", ge=0, le=10_000)
    window_first: int = env("WINDOW_FIRST", 0,
                             "Adaptive window budget: the verifier reads this many of a claim's windows (best pre-score "
                             "first), then WINDOW_CHUNK more at a time while any read window's entailment or "
                             "contradiction reaches 0.20 (workers/windows.py QUIET); 0 (default): all MAX_WINDOWS in one "
                             "call. Off by default: 8 reads 5-11 % fewer windows on the long-evidence sets and, left out "
                             "(tune decision --lodo, same tree, 0 vs 8), keeps shown coverage and precision within "
                             "0.5 points on every set (WiCE macro-F1 69.91 -> 70.43), but end to end a claim has about "
                             "3 windows, so the stream gains little; not yet benchmarked as a default.",
                             ge=0, le=1000)
    window_chunk: int = env("WINDOW_CHUNK", 8, "Windows read per later round of the adaptive window budget.",
                             ge=1, le=1000)
    title_in_premise: bool = env("TITLE_IN_PREMISE", False,
                                  "Prefix each evidence window with its passage title ('Title. window') before NLI, so "
                                  "a window that names its subject only by a pronoun is read about that subject.")
