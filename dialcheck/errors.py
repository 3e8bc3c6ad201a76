"""Everyday mistakes → one line and a non-zero exit; everything else stays a traceback.

Mapped by type: every error of dialcheck's own derives from `schemas.errors.DialcheckError` and says
its line and exit code. Why a closed list: a user who mistypes a path or points at a stopped broker needs the fix in one
line, while a real bug needs its traceback (`--debug` shows it for the mistakes too). `main()`
asks `one_line(error, args)`; None means "a bug: re-raise". One style for every usage or
environment error: one `dialcheck: ...` line, exit 2 (as argparse), whether the user
mistyped an option or a service does not answer (broker, Triton, OpenSearch: the line names it).
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from schemas.errors import DialcheckError
from schemas.settings import SettingsInvalid, load_settings, redact

USAGE = UNREACHABLE = 2
# options that name a file the user gives us to read
INPUT_FILE_OPTIONS = ("data", "gold", "file", "tsv")
# options that count records: 0 would silently mean "all" further down, so it is refused here
COUNT_OPTIONS = ("limit", "records")


class UsageError(DialcheckError):
    """A mistake the user can fix; the message is the one line they see."""
    exit_code = USAGE


class ServiceUnreachable(UsageError):
    """A configured service (Kafka broker, model server, search server) does not answer."""
    exit_code = UNREACHABLE


def port_in_use_line(host: str, port: int, option: str) -> str:
    """`option`: the command-line option or DIALCHECK_* setting that names the port."""
    choose = f"set {option} to" if option.startswith("DIALCHECK_") else f"pass {option} with"
    return f"port {host}:{port} is in use: {choose} another port (0: any free one) or stop what holds it"


def check_port_free(host: str, port: int | None, option: str = "--port") -> None:
    """UsageError when something already listens on host:port (0 / None: a free port is picked later).
    Bound with SO_REUSEADDR like aiohttp and tritonserver do, so a port in TIME_WAIT counts as free."""
    import socket

    if not port:
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise UsageError(f"cannot bind {host}:{port}: {e.strerror or e}") from None
    family, _, _, _, addr = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(addr)
        except PermissionError:
            raise UsageError(f"port {host}:{port} needs privileges: choose one above 1023 ({option})") from None
        except OSError as e:
            import errno

            if e.errno == errno.EADDRINUSE:
                raise UsageError(port_in_use_line(host, port, option)) from None
            raise UsageError(f"cannot bind {host}:{port}: {e.strerror or e} ({option})") from None


def input_files(args: argparse.Namespace) -> dict[str, str]:
    """{path: '--option'} for the input-file options this command was given."""
    out = {}
    for name in INPUT_FILE_OPTIONS:
        value = getattr(args, name, None)
        if isinstance(value, str) and value:
            out[value] = f"--{name}"
    return out


def preflight(args: argparse.Namespace) -> None:
    """Checks every command shares, before any model loads: counts, a configured broker."""
    for name in COUNT_OPTIONS:
        value = getattr(args, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value < 1:
            raise UsageError(f"--{name} must be at least 1 (got {value}); leave it out to use every record")
    data_dir = getattr(args, "data_dir", None)
    if isinstance(data_dir, str) and data_dir and not Path(data_dir).is_dir():
        raise UsageError(f"no such data directory: {data_dir} (--data-dir; the folder that holds dialfact/ and nli/)")
    for host, port, option in _requested_ports(args):  # a taken port: one line, before any broker wait or model load
        check_port_free(host, port, option)
    if hasattr(args, "broker"):  # the Kafka commands: a broker that does not answer fails fast, by name
        from streams.observability import wait_for_broker

        settings = load_settings(kafka={"bootstrap": getattr(args, "broker", None) or None})
        bootstrap = settings.kafka.bootstrap
        if bootstrap and not wait_for_broker(bootstrap, settings.stream.broker_wait_s):
            raise ServiceUnreachable(
                f"no Kafka broker answers at {redact(bootstrap)} (waited {settings.stream.broker_wait_s:g} s; "
                "check --broker / DIALCHECK_KAFKA_BOOTSTRAP, or DIALCHECK_BROKER_WAIT_S to wait longer)")


def _requested_ports(args: argparse.Namespace) -> list[tuple[str, int, str]]:
    """(host, port, option) a command will bind: `ui --port`, `demo --ui [--ui-port]`, `serve-models`."""
    command = getattr(args, "command", None)
    if command == "serve-models":
        host = getattr(args, "host", None) or "127.0.0.1"
        return [(host, p, o) for p, o in ((getattr(args, "http_port", 0), "--http-port"),
                                          (getattr(args, "grpc_port", 0), "--grpc-port")) if p]
    if command not in ("ui", "demo") or (command == "demo" and not getattr(args, "ui", False)):
        return []
    ui = load_settings().ui
    if command == "ui":
        return [(getattr(args, "host", None) or ui.host, ui.port if args.port is None else args.port, "--port")]
    args.port_option = "--ui-port"
    return [(ui.host, ui.port if args.ui_port is None else args.ui_port, "--ui-port")]


def one_line(error: BaseException, args: argparse.Namespace | None) -> tuple[int, str] | None:
    """(exit code, message) for an everyday mistake; None for anything else (a bug). By type: a
    `DialcheckError` (schemas/errors.py) says its own line and exit code; the few others are the
    standard library's and the Kafka client's."""
    files = input_files(args) if args is not None else {}
    if isinstance(error, FileNotFoundError) and error.filename in files:
        return USAGE, f"no such file: {error.filename} ({files[error.filename]})"
    if isinstance(error, SettingsInvalid):
        return error.exit_code, _readable_setting(str(error))
    if _is(error, "streams.ui.server", "PortInUse"):  # the option that names the port is the command's
        return error.exit_code, port_in_use_line(error.host, error.port, getattr(args, "port_option", None) or "--port")
    if isinstance(error, DialcheckError):
        return error.exit_code, redact(error.line())
    missing = _missing_data(error)
    if missing is not None:  # a data file the command needs (not one the user named): what to fetch
        return missing.exit_code, redact(str(missing))
    if isinstance(error, IsADirectoryError) and error.filename in files:
        return USAGE, f"not a file: {error.filename} ({files[error.filename]})"
    if isinstance(error, ValueError) and any(str(error).startswith(f"{p}:") for p in files):
        return USAGE, str(error).splitlines()[0]  # readers name the file and line: 'data.jsonl:3: ...'
    if _is(error, "kafka.errors", "NoBrokersAvailable") or _is(error, "kafka.errors", "KafkaConnectionError"):
        return UNREACHABLE, f"Kafka broker unavailable: {redact(str(error)) or type(error).__name__}"
    if type(error).__module__ in ("kafka.errors", "aiokafka.errors"):  # a frozen or overloaded broker: timeouts
        said = redact(str(error)).splitlines()[0][:200] if str(error) else ""
        return UNREACHABLE, f"Kafka broker did not answer: {type(error).__name__}{': ' + said if said else ''}"
    return None


def _missing_data(error: BaseException):
    """DataMissing, or a FileNotFoundError inside the data dir turned into one (dialcheck/commands/data.py)."""
    if not isinstance(error, FileNotFoundError):
        return None
    from dialcheck.commands.data import DataError, missing_data

    try:
        return missing_data(error, load_settings())
    except (SettingsInvalid, UsageError, DataError):
        return None


def _readable_setting(message: str) -> str:
    """pydantic's "String should match pattern '<regex>'" → "expected <the setting's doc>"."""
    import re

    from schemas.settings import SECTIONS

    m = re.match(r"invalid setting (\w+): String should match pattern '.*?'( \(got .*\))?$", message)
    if not m:
        return message
    for section in SECTIONS.values():
        for info in section.model_fields.values():
            if info.validation_alias.choices[0] == m.group(1) and info.description:
                return f"invalid setting {m.group(1)}{m.group(2) or ''}: expected {info.description[0].lower()}{info.description[1:]}"
    return message


def _is(error: BaseException, module: str, name: str) -> bool:
    """isinstance against an optional dependency's type, without importing it when absent."""
    import sys

    mod: Any = sys.modules.get(module)
    cls = getattr(mod, name, None) if mod is not None else None
    return isinstance(cls, type) and isinstance(error, cls)
