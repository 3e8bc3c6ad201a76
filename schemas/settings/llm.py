"""The LLM steps through any OpenAI-compatible endpoint."""
from __future__ import annotations

from pydantic import SecretStr

from schemas.settings.base import Section, env


class LLMSettings(Section):
    """The LLM steps (R5 rewrite, evidence-guided editing, the cascade judge) through any OpenAI-compatible endpoint."""
    _secret_urls = ("url",)
    url: str = env("LLM_URL", "", "Base URL of an OpenAI-compatible API, up to /v1 (vLLM http://HOST:8000/v1, "
                    "llama.cpp http://HOST:8080/v1, Ollama http://HOST:11434/v1). Empty: no LLM; r5/r5g take the "
                    "R4 path with a degraded status.")
    model: str = env("LLM_MODEL", "", "Model name sent with each request (empty: the first of the server's /v1/models).")
    api_key: SecretStr = env("LLM_API_KEY", SecretStr(""), "Bearer token for the endpoint (masked everywhere).")
    timeout_s: float = env("LLM_TIMEOUT_S", 20.0, "Per-request timeout; a request still unanswered after its "
                            "retries degrades its claim to the R4 path.", gt=0, le=600)
    retries: int = env("LLM_RETRIES", 1, "Retries of a request that timed out, could not connect or got 429/5xx.",
                        ge=0, le=10)
    max_tokens: int = env("LLM_MAX_TOKENS", 96, "Completion tokens per request (a rewrite is one sentence).",
                           ge=8, le=4096)
    concurrency: int = env("LLM_CONCURRENCY", 4, "Requests in flight at once per pipeline batch.", ge=1, le=256)
    batch_timeout_s: float = env("LLM_BATCH_TIMEOUT_S", 60.0, "Longest a pipeline batch waits for its LLM requests; "
                                  "claims still unanswered take the R4 path (keep it below DIALCHECK_BATCH_DEADLINE_S).",
                                  gt=0, le=3600)
    edit: bool = env("LLM_EDIT", False, "Evidence-guided editing (SuCEA) after the first retrieval: each sub-claim "
                      "edited with its top evidence into a query, retrieved again, merged. Off by default.")
    edit_subclaims: int = env("LLM_EDIT_SUBCLAIMS", 3, "Sub-claims per claim that evidence-guided editing edits.",
                               ge=1, le=20)
    judge: bool = env("LLM_JUDGE", False, "Cascade judge after verification: claims whose verdict would not be shown "
                       "(and NEI on on-topic evidence) are re-judged by the LLM citing a window; its label replaces the "
                       "NLI's only when the cited window exists. Off by default (docs/llm-judge.md).")
    judge_max_calls_per_batch: int = env("LLM_JUDGE_MAX_CALLS_PER_BATCH", 8, "Judge requests per pipeline batch at "
                                          "most; the other unsure claims keep the NLI verdict.", ge=0, le=1024)
    judge_top_windows: int = env("LLM_JUDGE_TOP_WINDOWS", 5, "Evidence windows the judge is shown, numbered [1]..[k] "
                                  "(the verifier's, by max(entail, contradict)).", ge=1, le=5)
    judge_timeout_s: float = env("LLM_JUDGE_TIMEOUT_S", 30.0, "Per-request timeout of a judge call (a reasoned "
                                  "answer is longer than a rewrite); unanswered, the NLI verdict stands, degraded.",
                                  gt=0, le=600)
    judge_max_tokens: int = env("LLM_JUDGE_MAX_TOKENS", 512, "Completion tokens per judge request (reasoning, then "
                                 "the LABEL and WINDOW lines).", ge=16, le=8192)
