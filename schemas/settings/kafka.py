"""The Kafka connection and topics. The broker URLs are parsed into client options on the streams side
(streams/kafka_config.py `parse_bootstrap`); here the value's form is checked when it is loaded."""
from __future__ import annotations

import re
from typing import Literal

from pydantic import SecretStr, field_validator

from schemas.settings.base import Section, env, existing_path

# one broker of the list: host:port, or kafka:// / kafkas:// with an optional user:password@ (the
# password may hold ':' and '@'; the host is what follows the last '@')
_BROKER = re.compile(r"(?:(?P<scheme>(?i:kafkas?))://(?:(?P<creds>[^:]+:.+)@)?|(?![^@]*://)(?=[^@]*$))[^@]*[^@/]/*")


def bootstrap_form_error(value: str) -> str | None:
    """Why the bootstrap list is not one a client can use (None: it is). The same rules as the
    parser on the streams side (streams/kafka_config.py `parse_bootstrap`), checked at load time so
    a bad broker URL is one line naming the variable, never a client's traceback later."""
    found = set()
    for part in re.split(r"[,;]", value):
        part = part.strip()
        if not part:
            continue
        m = _BROKER.fullmatch(part)
        if m is None:
            return ("expected host:port, kafka://[USER:PASSWORD@]host:port or kafkas://[USER:PASSWORD@]host:port "
                    "(credentials need the scheme in front and both a user and a password)")
        if m["creds"] or (m["scheme"] or "").lower() == "kafkas":
            found.add(((m["scheme"] or "").lower(), m["creds"]))
    if len(found) > 1:
        return ("the broker list gives different credentials or schemes for different hosts: "
                "give them once (one user, one protocol)")
    return None


class KafkaSettings(Section):
    _secret_urls = ("bootstrap",)
    bootstrap: str = env("KAFKA_BOOTSTRAP", "", "Kafka bootstrap servers (host:port[,...], or kafka://user:pass@host:port "
                          "for SASL PLAIN, kafkas:// for SASL_SSL); empty starts the embedded Tansu broker.")

    @field_validator("bootstrap")
    @classmethod
    def _check_bootstrap(cls, v: str) -> str:
        error = bootstrap_form_error(v)
        if error:
            raise ValueError(error)
        return v
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = env(
        "KAFKA_SECURITY_PROTOCOL", "PLAINTEXT", "Security protocol.")
    sasl_mechanism: Literal["", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = env(
        "KAFKA_SASL_MECHANISM", "", "SASL mechanism (empty: PLAIN when a SASL protocol is chosen).")
    sasl_username: str = env("KAFKA_SASL_USERNAME", "", "SASL user.")
    sasl_password: SecretStr = env("KAFKA_SASL_PASSWORD", SecretStr(""), "SASL password (masked everywhere).")
    ssl_cafile: str = env("KAFKA_SSL_CAFILE", "", "CA bundle for TLS.")
    ssl_certfile: str = env("KAFKA_SSL_CERTFILE", "", "Client certificate for mutual TLS.")
    ssl_keyfile: str = env("KAFKA_SSL_KEYFILE", "", "Client key for mutual TLS.")

    @field_validator("ssl_cafile", "ssl_certfile", "ssl_keyfile")
    @classmethod
    def _tls_file_exists(cls, v: str) -> str:
        """A TLS file named is read at the first connection: a mistyped one is refused at settings load."""
        return existing_path(v, "file", "a TLS file the Kafka client reads (PEM)") if v else v
    topic_turns: str = env("TOPIC_TURNS", "chat.turns", "Input topic (key: conversation id).", min_length=1)
    topic_verdicts: str = env("TOPIC_VERDICTS", "chat.verdicts", "Verdict topic (key: conversation id).", min_length=1)
    topic_deadletter: str = env("TOPIC_DEADLETTER", "chat.deadletter", "Rejected input with reasons.", min_length=1)
    topic_knowledge: str = env("TOPIC_KNOWLEDGE", "chat.knowledge",
                               "Passages a conversation's assistant was given (docs/integration.md#grounded-turns; key: "
                               "conversation id); every later turn of that conversation is checked against them.",
                               min_length=1)
    topic_feedback: str = env("TOPIC_FEEDBACK", "chat.feedback", "Judgements of verdicts (schemas/feedback.schema.json; "
                              "key: conversation id).", min_length=1)
    # what the producer and the group may assume of the broker (streams/kafka_config.py `faust_client_kwargs`)
    broker_kind: Literal["auto", "tansu", "kafka"] = env(
        "BROKER_KIND", "auto",
        "Which broker the worker talks to. tansu (the embedded broker is Tansu): one record per produce batch, "
        "because Tansu reports wrong end offsets after multi-record batches and a table restored from its "
        "changelog would lose state, and a 6 s session timeout (Tansu holds a JoinGroup for half of it). "
        "kafka (Apache Kafka, Redpanda, MSK, ...): the producer batches (KAFKA_LINGER_MS, KAFKA_BATCH_BYTES) "
        "and the group keeps Kafka's usual 45 s session timeout. auto: tansu when the embedded broker was "
        "started here or the cluster id names Tansu, else kafka.")
    linger_ms: float = env("KAFKA_LINGER_MS", 5.0,
                           "Against Kafka: how long the producer waits to fill a batch. The worker sends a batch's "
                           "verdicts together and awaits them once, so a few ms gather them in one request "
                           "(librdkafka's and Kafka 4's default is 5 ms).", ge=0, le=1000)
    batch_bytes: int = env("KAFKA_BATCH_BYTES", 131072,
                           "Against Kafka: the most bytes of one produce batch per partition. A verdict is 1-4 KB, "
                           "a pipeline batch up to 64 turns, so 128 KiB keeps one partition's share of a batch in "
                           "one request; below the 1 MB request and message limits.", ge=1024, le=900000)
    topic_partitions: int = env("TOPIC_PARTITIONS", 4,
                                 "Partitions of the stream topics and changelogs when dialcheck creates them.", ge=1, le=10000)
    topic_replication: int = env("TOPIC_REPLICATION", 1, "Replication factor of topics dialcheck creates.", ge=1, le=16)
