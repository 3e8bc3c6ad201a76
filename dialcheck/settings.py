"""All configuration declared once: each field has its environment variable, default and doc.
The CLI, the stream worker and the evaluator all build their Settings here."""
from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def _opt(default, env: str, doc: str):
    return field(default=default, metadata={"env": env, "doc": doc})


@dataclass(frozen=True)
class Settings:
    data_dir: str = _opt(str(REPO_ROOT.parent / "shared" / "data"), "DIALCHECK_DATA_DIR",
                         "Root of the shared data (DialFact, NLI sets, FoolMeTwice, WiCE).")
    models: str = _opt("local", "DIALCHECK_MODELS",
                       "'local' (in-process ONNX Runtime) or 'triton://HOST:PORT' (gRPC) / 'triton+http://HOST:PORT'.")
    nli_model_dir: str = _opt(str(REPO_ROOT / "triton_models" / "nli" / "1"), "DIALCHECK_NLI_MODEL_DIR",
                              "Directory with model.onnx, tokenizer and calibration.json, or any HF NLI model dir.")
    encoder: str = _opt("e5", "DIALCHECK_ENCODER", "Sentence encoder for the gate and dense retrieval: e5 | minilm.")
    index_dir: str = _opt(str(REPO_ROOT / "artifacts" / "index"), "DIALCHECK_INDEX_DIR",
                          "Embedded passage index built by `dialcheck index build`.")
    search_backend: str = _opt("embedded", "DIALCHECK_SEARCH", "'embedded' or 'opensearch'.")
    opensearch_url: str = _opt("http://127.0.0.1:9200", "DIALCHECK_OPENSEARCH_URL", "OpenSearch endpoint.")
    opensearch_index: str = _opt("dialcheck-passages", "DIALCHECK_OPENSEARCH_INDEX", "OpenSearch index name.")
    tau_ir: float = _opt(0.50, "DIALCHECK_TAU_IR", "Gate threshold when the surface feeds retrieval.")
    tau_fv: float = _opt(0.70, "DIALCHECK_TAU_FV", "Gate threshold when the surface feeds verification.")
    gate_weights: tuple = _opt((0.4, 0.2, 0.4), "DIALCHECK_GATE_WEIGHTS", "alpha, beta, gamma of the gate score.")
    hypothesis_context_turns: int = _opt(0, "DIALCHECK_HYP_CONTEXT_TURNS",
                                         "Context turns prepended to the claim as the verifier's NLI hypothesis. The paper "
                                         "used 2 with DeBERTa-large; with our MiniLM model 0 measured far better (README).")
    gate_context_turns: int = _opt(2, "DIALCHECK_GATE_CONTEXT_TURNS",
                                   "Context turns C the gate reads in C+R0 <=> Rk (antecedents of R4 live there).")
    query_context_turns: int = _opt(2, "DIALCHECK_QUERY_CONTEXT_TURNS",
                                    "Context turns prepended to the claim surface as the retrieval query (paper: C + Rk).")
    bm25_k1: float = _opt(1.5, "DIALCHECK_BM25_K1", "BM25 k1.")
    bm25_b: float = _opt(0.4, "DIALCHECK_BM25_B", "BM25 b.")
    bm25_top_k: int = _opt(180, "DIALCHECK_BM25_TOP_K", "BM25 candidates kept before dense re-scoring.")
    dense_top_k: int = _opt(10, "DIALCHECK_DENSE_TOP_K", "Passages kept after dense re-scoring.")
    verify_top_passages: int = _opt(3, "DIALCHECK_VERIFY_PASSAGES", "Retrieved passages the verifier reads (e2e).")
    max_windows: int = _opt(24, "DIALCHECK_MAX_WINDOWS", "Windows kept by the lexical pre-score.")
    entail_threshold: float = _opt(0.55, "DIALCHECK_ENTAIL_THRESHOLD", "Minimum entailment (or contradiction) probability.")
    win_gap: float = _opt(0.15, "DIALCHECK_WIN_GAP", "Required margin over the other two classes.")
    decision_rule: str = _opt("threshold", "DIALCHECK_DECISION_RULE",
                              "'threshold' (entail/contradict >= threshold with the win gap) or 'argmax' of the NLI classes.")
    kafka_bootstrap: str = _opt("", "DIALCHECK_KAFKA_BOOTSTRAP", "Kafka bootstrap servers; empty starts the embedded Tansu broker.")
    kafka_security_protocol: str = _opt("PLAINTEXT", "DIALCHECK_KAFKA_SECURITY_PROTOCOL", "PLAINTEXT | SSL | SASL_SSL | SASL_PLAINTEXT.")
    kafka_sasl_mechanism: str = _opt("", "DIALCHECK_KAFKA_SASL_MECHANISM", "PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512.")
    kafka_sasl_username: str = _opt("", "DIALCHECK_KAFKA_SASL_USERNAME", "SASL user.")
    kafka_sasl_password: str = _opt("", "DIALCHECK_KAFKA_SASL_PASSWORD", "SASL password.")
    kafka_ssl_cafile: str = _opt("", "DIALCHECK_KAFKA_SSL_CAFILE", "CA bundle for TLS.")
    topic_turns: str = _opt("chat.turns", "DIALCHECK_TOPIC_TURNS", "Input topic (key: conversation id).")
    topic_verdicts: str = _opt("chat.verdicts", "DIALCHECK_TOPIC_VERDICTS", "Verdict topic (key: conversation id).")
    topic_deadletter: str = _opt("chat.deadletter", "DIALCHECK_TOPIC_DEADLETTER", "Rejected input with reasons.")
    context_turns: int = _opt(10, "DIALCHECK_CONTEXT_TURNS", "Turns kept per conversation.")
    context_idle_s: float = _opt(3600.0, "DIALCHECK_CONTEXT_IDLE_S", "Evict a conversation idle this long.")
    check_roles: str = _opt("assistant,bot", "DIALCHECK_CHECK_ROLES", "Speaker roles whose turns are checked (comma list).")
    max_text_chars: int = _opt(4000, "DIALCHECK_MAX_TEXT_CHARS", "Longer turns are rejected to the dead-letter topic.")
    batch_size: int = _opt(16, "DIALCHECK_BATCH_SIZE", "Turns per model batch in the stream worker.")
    batch_within_s: float = _opt(0.2, "DIALCHECK_BATCH_WITHIN_S", "Max wait to fill a batch.")
    topic_partitions: int = _opt(4, "DIALCHECK_TOPIC_PARTITIONS", "Partitions of the stream topics and changelogs when dialcheck creates them.")
    topic_replication: int = _opt(1, "DIALCHECK_TOPIC_REPLICATION", "Replication factor of topics dialcheck creates.")
    stream_app_id: str = _opt("dialcheck", "DIALCHECK_STREAM_APP_ID", "Faust app id: consumer group and changelog topic prefix.")
    stream_status_interval_s: float = _opt(5.0, "DIALCHECK_STREAM_STATUS_S", "Worker status log and idle-eviction sweep period.")
    kafka_ssl_certfile: str = _opt("", "DIALCHECK_KAFKA_SSL_CERTFILE", "Client certificate for mutual TLS.")
    kafka_ssl_keyfile: str = _opt("", "DIALCHECK_KAFKA_SSL_KEYFILE", "Client key for mutual TLS.")

    @property
    def dialfact_sample(self) -> str:
        """The DialFact JSONL that eval, replay, demo, benchmarks and tests default to."""
        return str(Path(self.data_dir) / "dialfact" / "testsmall.jsonl")

    @classmethod
    def from_env(cls, **overrides) -> "Settings":
        """Defaults, overridden by environment variables, overridden by explicit arguments."""
        values = {}
        for f in fields(cls):
            raw = os.environ.get(f.metadata["env"])
            if raw is None:
                continue
            if isinstance(f.default, tuple):
                values[f.name] = tuple(float(x) for x in raw.split(","))
            else:
                values[f.name] = type(f.default)(raw)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return replace(cls(), **values)

    @classmethod
    def describe(cls) -> list[tuple[str, str, object, str]]:
        return [(f.name, f.metadata["env"], f.default, f.metadata["doc"]) for f in fields(cls)]
