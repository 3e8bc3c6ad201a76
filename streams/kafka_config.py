"""One place that turns Settings into client options for faust, aiokafka and kafka-python.

Why: the three clients spell the same security settings differently; getting one of them wrong
means a worker that talks to the broker while the replay tool cannot (or the reverse).
"""
from __future__ import annotations

import ssl
from typing import Any
from urllib.parse import unquote

from schemas.settings import Settings

_PROTOCOLS = {"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}


def parse_bootstrap(value: str) -> tuple[list[str], dict[str, Any]]:
    """The Kafka bootstrap setting → (hosts, security the URL gives), the one parser of broker URLs;
    the functions below build the clients' options from it (KafkaSettings checks the same form at
    load time, schemas/settings/kafka.py). 'h1:9092,kafka://h2:9092' → (['h1:9092', 'h2:9092'], {}).
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


def bootstrap_list(settings: Settings) -> list[str]:
    """'h1:9092,kafka://user:pass@h2:9092' → ['h1:9092', 'h2:9092'] (credentials never in the list)."""
    out, _ = parse_bootstrap(settings.kafka.bootstrap)
    if not out:
        raise ValueError("no Kafka bootstrap servers configured")
    return out


def _url_security(settings: Settings) -> dict[str, Any]:
    return parse_bootstrap(settings.kafka.bootstrap)[1]


def _protocol(settings: Settings) -> str:
    from_url = _url_security(settings).get("security_protocol")
    proto = (settings.kafka.security_protocol or "PLAINTEXT").upper()
    if from_url and proto == "PLAINTEXT":  # the URL's scheme and credentials decide unless a protocol is set
        proto = from_url
    if proto not in _PROTOCOLS:
        raise ValueError(f"DIALCHECK_KAFKA_SECURITY_PROTOCOL must be one of {sorted(_PROTOCOLS)}, not {proto!r}")
    return proto


def sasl_credentials(settings: Settings) -> tuple[str, str]:
    """(user, password): from the broker URL when it has them, else the SASL settings."""
    url = _url_security(settings)
    if "sasl_username" in url:
        return url["sasl_username"], url["sasl_password"]
    return settings.kafka.sasl_username, settings.kafka.sasl_password.get_secret_value()


def ssl_context(settings: Settings) -> ssl.SSLContext | None:
    if "SSL" not in _protocol(settings):
        return None
    ctx = ssl.create_default_context(cafile=settings.kafka.ssl_cafile or None)
    if settings.kafka.ssl_certfile:
        ctx.load_cert_chain(settings.kafka.ssl_certfile, settings.kafka.ssl_keyfile or None)
    return ctx


def faust_broker_kwargs(settings: Settings) -> dict[str, Any]:
    """`broker=` and `broker_credentials=` for faust.App."""
    import faust

    kw: dict[str, Any] = {"broker": ";".join(f"kafka://{b}" for b in bootstrap_list(settings))}
    proto = _protocol(settings)
    if proto.startswith("SASL"):
        user, password = sasl_credentials(settings)
        kw["broker_credentials"] = faust.SASLCredentials(
            username=user, password=password,
            ssl_context=ssl_context(settings), mechanism=settings.kafka.sasl_mechanism or "PLAIN")
    elif proto == "SSL":
        kw["broker_credentials"] = faust.SSLCredentials(ssl_context(settings))
    return kw


def aiokafka_kwargs(settings: Settings) -> dict[str, Any]:
    proto = _protocol(settings)
    kw: dict[str, Any] = {"bootstrap_servers": bootstrap_list(settings), "security_protocol": proto}
    if "SSL" in proto:
        kw["ssl_context"] = ssl_context(settings)
    if proto.startswith("SASL"):
        user, password = sasl_credentials(settings)
        kw.update(sasl_mechanism=settings.kafka.sasl_mechanism or "PLAIN",
                  sasl_plain_username=user, sasl_plain_password=password)
    return kw


def kafka_python_kwargs(settings: Settings) -> dict[str, Any]:
    proto = _protocol(settings)
    kw: dict[str, Any] = {"bootstrap_servers": bootstrap_list(settings), "security_protocol": proto}
    if "SSL" in proto:
        kw.update({k: v for k, v in (("ssl_cafile", settings.kafka.ssl_cafile),
                                     ("ssl_certfile", settings.kafka.ssl_certfile),
                                     ("ssl_keyfile", settings.kafka.ssl_keyfile)) if v})
    if proto.startswith("SASL"):
        user, password = sasl_credentials(settings)
        kw.update(sasl_mechanism=settings.kafka.sasl_mechanism or "PLAIN",
                  sasl_plain_username=user, sasl_plain_password=password)
    return kw


# The group and producer settings per broker kind (the `broker_kind` setting, resolved by
# streams/broker.py `broker_kind`). Tansu's are workarounds, verified against Tansu 0.6:
# - one record per produce batch: after a multi-record batch Tansu reports a wrong end offset, and a
#   table restored from its changelog up to that offset loses state;
# - a 6 s session timeout, heartbeats every second: Tansu holds a JoinGroup for half the session
#   timeout, so Kafka's 45 s would stall every rebalance for 22 s (and a killed worker's partitions
#   would wait 45 s for another worker).
# Against Kafka those would cost one produce request per record; there the producer batches
# (linger, batch bytes: settings) and the group keeps Kafka's defaults (KIP-735: 45 s, 3 s).
TANSU_CLIENT = {"broker_session_timeout": 6.0, "broker_heartbeat_interval": 1.0,
                "producer_max_batch_size": 1, "producer_linger": 0.0}
KAFKA_SESSION_TIMEOUT_S = 45.0
KAFKA_HEARTBEAT_INTERVAL_S = 3.0


def faust_client_kwargs(settings: Settings, kind: str) -> dict[str, Any]:
    """faust.App's group and producer settings for a broker of `kind` ("tansu" or "kafka")."""
    if kind == "tansu":
        return dict(TANSU_CLIENT)
    if kind != "kafka":
        raise ValueError(f"broker kind must be 'tansu' or 'kafka' here, not {kind!r}")
    return {"broker_session_timeout": KAFKA_SESSION_TIMEOUT_S, "broker_heartbeat_interval": KAFKA_HEARTBEAT_INTERVAL_S,
            "producer_max_batch_size": settings.kafka.batch_bytes, "producer_linger": settings.kafka.linger_ms / 1000.0}
