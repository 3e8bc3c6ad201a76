"""The small interfaces every backend sits behind, and the outages they may declare.

Stages depend only on these, so in-process (ONNX Runtime / torch) and served (Triton, OpenSearch)
implementations are interchangeable, and streams/ can run any `Checker` without importing NLP code.
Only `ModelUnavailable` and `SearchUnavailable` are turned into degraded verdicts by the pipeline;
any other exception is a bug and propagates to the stream's error-verdict path."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Protocol, Sequence, runtime_checkable

import numpy as np

from .errors import DialcheckError
from .items import CheckItem

# The evaluation protocols (DialFact's): fact verification on the gold evidence, end to end with
# retrieval, and retrieval alone. Every list of them (the CLI's choices, the run-file reader, the
# Pipeline's check) reads these.
PROTOCOLS = ("fv", "e2e", "ir")
LABEL_PROTOCOLS = ("fv", "e2e")       # the protocols that end in a label
RETRIEVAL_PROTOCOLS = ("e2e", "ir")   # the protocols that search an index

# The claim surfaces the verifier can read (workers/surfaces, workers/llm): r0 the reply as written,
# r1-r4 rule rewrites, r4g R4 behind the BiCon gate, r5/r5g the LLM rewrite (falling back to r4/r4g).
# Every list of them (the settings' `claims.surface`, the CLI's checks, the Pipeline's stage table)
# reads this one.
SURFACES = ("r0", "r1", "r2", "r3", "r4", "r4g", "r5", "r5g")


class ModelUnavailable(DialcheckError, RuntimeError):
    """A model backend failed (server down, timeout, bad artifact). Callers degrade, never drop."""
    prefix = "model server unavailable: "


class SearchUnavailable(DialcheckError, RuntimeError):
    """The index or search server failed; the pipeline degrades with this reason."""
    prefix = "search backend unavailable: "


class LLMUnavailable(ModelUnavailable):
    """The language-model endpoint failed (unreachable, timed out, refused, unreadable answer).
    A ModelUnavailable, so the runner degrades too; the LLM steps fall back to the R4 path or the
    first retrieval and say so in the verdict's status. Messages never carry the API key."""


@runtime_checkable
class LLM(Protocol):
    """Chat completions (the OpenAI-compatible API vLLM, llama.cpp, Ollama, LM Studio, TGI serve).
    One reply per conversation, in order; a slot holds the `LLMUnavailable` that says why that one
    failed (after bounded retries), so one slow request degrades one claim, not the batch."""

    model: str

    def complete_many(self, conversations: Sequence[Sequence[dict]]) -> list["str | LLMUnavailable"]: ...


# The column order of every NLIModel's output (model head, Triton output, gate, verifier, decision)
NLI_LABELS: tuple[str, str, str] = ("entailment", "neutral", "contradiction")
ENTAILMENT, NEUTRAL, CONTRADICTION = 0, 1, 2


@runtime_checkable
class NLIModel(Protocol):
    """Three-way NLI. Rows of the result are calibrated probabilities in `NLI_LABELS` order
    (entailment, neutral, contradiction). A model whose `predict` may run on another thread than its
    caller's also sets `any_thread = True` (the Pipeline then overlaps its reads with other stages)."""

    version: str

    def predict(self, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray: ...


@runtime_checkable
class Encoder(Protocol):
    """Sentence encoder returning L2-normalised rows (so a dot product is a cosine)."""

    version: str
    dim: int

    def encode(self, texts: Sequence[str], *, is_query: bool = False) -> np.ndarray: ...


@dataclass(frozen=True)
class Passage:
    id: str
    title: str
    text: str
    score: float = 0.0
    doc_id: str = ""  # the source document (title for Wikipedia); passages of one doc share it
    url: str | None = None  # the source link (verdict evidence url), when the corpus has one

    def with_score(self, score: float) -> "Passage":
        # the constructor, not dataclasses.replace: BM25 makes ~900 of these per claim (180 per
        # query) and replace() was 2.5 % of an e2e run's time
        return Passage(self.id, self.title, self.text, float(score), self.doc_id, self.url)


@runtime_checkable
class Searcher(Protocol):
    """pyserini-style: one `search()` whatever the backend."""

    name: str

    def search(self, query: str, k: int) -> list[Passage]:
        """BM25 (k1 1.5, b 0.4) top-k passages, best first."""

    def search_many(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        """`search` for several queries (one round trip where the backend allows it)."""

    def vectors(self, passage_ids: Sequence[str]) -> np.ndarray | None:
        """Stored encoder vectors for these passages, or None if the backend keeps none
        (dense re-scoring then encodes the passages client-side)."""

    def dense_search(self, query_vector: np.ndarray, k: int) -> list[Passage] | None:
        """Server-side kNN, or None where the backend has none."""


@dataclass
class TurnResult:
    """One checked turn: every verdict to publish, in order (each claim's, then the turn's summary
    when the turn held several claims; one verdict otherwise), the claim states behind them (for
    evaluation and tuning: the pipeline's stage fields), and what a claim cap left unchecked."""
    item: CheckItem
    verdicts: list  # list[schemas.Verdict]; the turn's own verdict last
    states: list = field(default_factory=list)
    note: str | None = None

    @property
    def verdict(self):
        """The turn's verdict (the summary when the turn was split)."""
        return self.verdicts[-1]


def turn_verdicts(turns: Sequence[TurnResult]) -> list:
    """The turn's own verdict of each checked turn, in order."""
    return [t.verdict for t in turns]


@runtime_checkable
class Checker(Protocol):
    """What the stream worker, `dialcheck check` and `dialcheck eval` call: per item, in order, a
    `TurnResult` whose verdicts are all published."""

    def check_turns(self, items: list[CheckItem]) -> list[TurnResult]: ...


@runtime_checkable
class CacheStats(Protocol):
    """A checker that reports its caches (workers/pipeline.py `Pipeline.cache_stats`): per cache name,
    `hits`, `misses`, `entries` and `capacity`. The worker's /metrics reads it at scrape time."""

    def cache_stats(self) -> Mapping[str, Mapping[str, int]]: ...


@runtime_checkable
class ReplyStats(Protocol):
    """A checker whose LLM steps count what the model replied (workers/llm/replies.py `COUNTS`): per
    step (`r5`, `edit`, `judge`), replies per kind (`ok`, `echo`, `empty`, … `unavailable`). The
    worker's /metrics reads it at scrape time, so a model that mostly echoes shows as a number."""

    def llm_replies(self) -> Mapping[str, Mapping[str, int]]: ...


@runtime_checkable
class ModelVersions(Protocol):
    """A checker that names the models it serves now (workers/pipeline.py `Pipeline.model_versions`:
    `nli`, `encoder`, `index`, ...); a SIGHUP reload changes them. /metrics' dialcheck_model_info."""

    def model_versions(self) -> Mapping[str, str]: ...


class ReloadRefused(DialcheckError):
    """A reload that kept what was in use; the message says why (one line, for the log)."""


@runtime_checkable
class DisplayReload(Protocol):
    """A checker that can re-read its display file while running (workers/pipeline.py
    `Pipeline.reload_display`); the stream worker calls it on SIGHUP when the checker has no
    `reload` (`Reload`), streams/ never imports workers/."""

    def reload_display(self) -> str:
        """Re-read the display file and use it from the next batch; the policy now in use, in words.
        Raises ReloadRefused (the old policy kept) for a missing, broken or mismatched file."""
        ...


@runtime_checkable
class Reload(Protocol):
    """A checker that can re-read everything it serves with while running: the NLI model directory,
    the decision and the display together (workers/pipeline.py `Pipeline.reload`); the stream worker
    calls it on SIGHUP."""

    def reload(self) -> str:
        """Load and check the new set, then use it from the next batch (a batch reads one set, never a
        mix); what is now in use, in words, naming the model version. Raises ReloadRefused (the
        running set kept) for a missing, broken or mismatched directory or file."""
        ...
