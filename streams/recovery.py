"""When the worker's tables cannot be restored: said in one line, and the safe reset.

The worker's tables (dialogue context, pipeline attempts, conversation knowledge) live in Kafka
changelog topics and are restored from them at start. A broker that came back without its data (a
cluster rebuilt, a topic recreated, Tansu's memory storage restarted) leaves changelogs that no longer
match what their offsets promise, and Faust's recovery then waits for records that will never come
(seen: "No event received for active tp ... since recovery start", /readyz 503 for good; wiping the
state directory does not help, the changelogs are on the broker). Two pieces:

- `data_lost`: the broker watch (streams/broker_watch.py) saw the input topic end earlier than it did
  (or vanish) while the worker ran: one line, exit 3, before a restart would hang.
- `recovery_stuck`: past `stream.recovery_timeout_s` the worker says so in one line, naming the
  documented step, and exits 3 (a supervisor's restart cannot fix it; an operator must choose).
- `reset_state` (`dialcheck worker --reset-state`): deletes this app's changelog topics and its local
  state directory, refusing while another member of the app's consumer group is running (deleting
  a changelog under a live worker would lose its state for real). What is lost: the dialogue context,
  the poison-attempt counts and the conversations' knowledge, which the broker had lost already.
  Committed input offsets are not touched: the worker reads on from them (or from the earliest record
  when the broker no longer has them).
"""
from __future__ import annotations

import logging
import os
import shutil
import sys

from schemas.errors import DialcheckError
from schemas.settings import Settings

log = logging.getLogger("dialcheck.stream")

EXIT_RECOVERY = 3  # tables could not be restored in time: an operator's decision (docs/operations.md)
RESET_HINT = "if the broker lost its data, `dialcheck worker --reset-state` (docs/operations.md#the-broker-lost-its-data)"


class ResetRefused(DialcheckError):
    """The state cannot be reset safely now (another worker of the group runs, or the broker does not answer)."""


def changelog_topics(settings: Settings, tables: list[str]) -> list[str]:
    """Faust's changelog topic of each table: <app id>-<table>-changelog."""
    return [f"{settings.stream.app_id}-{t}-changelog" for t in tables]


def recovery_stuck(settings: Settings) -> None:
    """Table recovery did not finish within `recovery_timeout_s`: one line, exit 3, no shutdown path
    (nothing was processed, nothing to commit)."""
    log.critical("table recovery did not finish within %.0f s (DIALCHECK_RECOVERY_TIMEOUT_S): the changelogs "
                 "on the broker do not hold what their offsets promise; %s", settings.stream.recovery_timeout_s,
                 RESET_HINT)
    _exit_now()


def data_lost(settings: Settings, how: str) -> None:
    """The input topic shows that the broker lost data while the worker ran (streams/broker_watch.py):
    its tables no longer match their changelogs, and a restart would wait in recovery. One line, exit 3
    (the held inputs are not acknowledged; nothing more is checked on state the broker no longer has)."""
    log.critical("the broker came back without the data this worker's state was built from (%s); stop every "
                 "worker of this app, run `dialcheck worker --reset-state`, start again "
                 "(docs/operations.md#the-broker-lost-its-data)", how)
    _exit_now()


def _exit_now() -> None:
    for h in logging.getLogger().handlers:
        h.flush()
    sys.stdout.flush()
    os._exit(EXIT_RECOVERY)


def group_members(settings: Settings, group: str) -> int:
    """How many members `group` has now, as the broker lists them. confluent-kafka's admin client, not
    kafka-python's: the latter cannot decode Tansu 0.6's DescribeGroups answer. Tansu 0.6 lists no
    members at all (a running group reads "stable" with none), so there the check cannot see a running
    worker: stop them first (docs/operations.md)."""
    from confluent_kafka.admin import AdminClient

    from .kafka_config import kafka_python_kwargs

    kw = kafka_python_kwargs(settings)
    conf = {"bootstrap.servers": ",".join(kw["bootstrap_servers"]), "security.protocol": kw["security_protocol"],
            "log_level": 3}
    for ours, theirs in (("ssl_cafile", "ssl.ca.location"), ("ssl_certfile", "ssl.certificate.location"),
                         ("ssl_keyfile", "ssl.key.location"), ("sasl_mechanism", "sasl.mechanism"),
                         ("sasl_plain_username", "sasl.username"), ("sasl_plain_password", "sasl.password")):
        if kw.get(ours):
            conf[theirs] = kw[ours]
    admin = AdminClient(conf)  # kept referenced until the answer is in: destroyed, it fails the future
    described = admin.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=15)
    return len(described.members or [])


def reset_state(settings: Settings, tables: list[str]) -> list[str]:
    """Delete the app's changelog topics (those that exist) and its state directory; the lines to print."""
    from kafka import KafkaAdminClient

    from .kafka_config import kafka_python_kwargs

    group = settings.stream.app_id
    try:
        admin = KafkaAdminClient(**kafka_python_kwargs(settings), request_timeout_ms=10_000, bootstrap_timeout_ms=10_000)
    except Exception as e:  # noqa: BLE001 - whatever the client says, the broker is not there
        raise ResetRefused(f"cannot reset the worker's state: the broker does not answer ({type(e).__name__})") from None
    try:
        members = group_members(settings, group)
        if members:
            raise ResetRefused(f"cannot reset the worker's state: {members} member(s) of group {group!r} are "
                               "running; stop every worker of this app first")
        present = set(admin.list_topics())
        doomed = [t for t in changelog_topics(settings, tables) if t in present]
        if doomed:
            admin.delete_topics(doomed)
    finally:
        admin.close()
    lines = [f"deleted changelog topics: {', '.join(doomed) or 'none existed'}"]
    state = settings.stream.state_path
    if state.exists():
        shutil.rmtree(state)
        lines.append(f"removed the state directory {state}")
    return lines
