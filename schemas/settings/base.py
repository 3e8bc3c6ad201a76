"""What every settings section shares: its DIALCHECK_* prefix, the field helper, masking.

Why pydantic-settings: values are checked when they are loaded (choices, ranges), a bad value
becomes one line that names the variable (`SettingsInvalid`), and nothing is read at import time.
Secrets (SASL password, credentials inside URLs) are masked in every repr and in `as_table()`."""
from __future__ import annotations

import difflib
import os
import sys
from pathlib import Path
from typing import Any, Iterable, Mapping, TextIO

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from schemas.errors import DialcheckError
from schemas.secrets import mask_urls as redact  # the one scrubber's URL rule (schemas/secrets.py)

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
ENV_PREFIX = "DIALCHECK_"


def existing_path(value: str, kind: str, what: str) -> str:
    """`value` when it names an existing file or directory (`kind`), else the one-line reason: a
    mistyped path setting is refused when the settings load, not 60 lines into a model load."""
    from pydantic_core import PydanticCustomError

    p = Path(value).expanduser()
    ok = p.is_dir() if kind == "directory" else p.is_file()
    if not ok:
        reason = f"not a {kind}" if p.exists() else f"no such {kind}"
        raise PydanticCustomError("path", "{reason}: {what}", {"reason": reason, "what": what})
    return value


def creatable_path(value: str, kind: str, what: str) -> str:
    """`value` when it names an existing `kind` (file or directory) or one that can be made in a folder
    that exists and is writable; else the one-line reason. Why: a missing folder was made at the
    filesystem root, and a path that could not be made failed only after the models had loaded."""
    import os

    from pydantic_core import PydanticCustomError

    p = Path(value).expanduser()
    if p.exists():
        ok = p.is_dir() if kind == "directory" else p.is_file()
        if not ok:
            raise PydanticCustomError("path", "not a {kind}: {what}", {"kind": kind, "what": what})
        return value
    parent = p.parent
    if not parent.is_dir():
        reason = f"{parent} is not a directory" if parent.exists() else f"no such directory {parent}"
        raise PydanticCustomError("path", "{reason} (make it first): {what}", {"reason": reason, "what": what})
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PydanticCustomError("path", "{parent} is not writable: {what}", {"parent": str(parent), "what": what})
    return value


class SettingsInvalid(DialcheckError, ValueError):
    """A setting that cannot be used; the message is one line naming the variable."""


# DIALCHECK_* variables that are read outside the settings sections, so are not misspelt settings:
# docker-compose.yml's (HOST_DATA_DIR, TRITON_HOST, UI_HOST_PORT), `dialcheck data fetch`'s mirror,
# the embedded broker's log file, the bench scripts' and the tests' own.
OTHER_VARIABLES = frozenset(ENV_PREFIX + n for n in (
    "HOST_DATA_DIR", "TRITON_HOST", "UI_HOST_PORT", "DATA_BASE_URL", "BROKER_LOG", "GPU_CHECKPOINT",
    "VERIFIER_BASE", "STANDIN_DELAY_S", "TEST_STREAM_PIPELINE"))
_warned: set[str] = set()  # each unknown variable is told once per process, however often settings load


def warn_unknown_variables(settings: Iterable[str], environ: Mapping[str, str] = os.environ,
                           stream: TextIO | None = None, warned: set[str] = _warned) -> list[str]:
    """One stderr line for each DIALCHECK_* variable that is no setting (`settings`: every section's
    names), naming the nearest setting. Why: the sections ignore what they do not read (the
    environment holds much else), so a misspelt DIALCHECK_METRICS_PROT left the default in force
    without a word. A warning, not an error: a variable meant for another tool must not stop a run.
    Returns the lines written."""
    known = set(settings)
    lines = []
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX) or name in known or name in OTHER_VARIABLES or name in warned:
            continue
        warned.add(name)
        short = sorted(k.removeprefix(ENV_PREFIX) for k in known)  # the shared prefix would make any name "close"
        near = difflib.get_close_matches(name.removeprefix(ENV_PREFIX), short, n=1, cutoff=0.75)
        hint = f" (did you mean {ENV_PREFIX}{near[0]}?)" if near else " (`dialcheck config` lists the settings)"
        lines.append(f"dialcheck: warning: {name} is not a setting and is ignored{hint}")
    for line in lines:
        print(line, file=stream or sys.stderr, flush=True)
    return lines


def variable_names(section: type["Section"]) -> list[str]:
    """The DIALCHECK_* names a section reads."""
    return [name for f in section.model_fields.values() if isinstance(f.validation_alias, AliasChoices)
            for name in f.validation_alias.choices if isinstance(name, str)]


def env(name: str, default: Any, doc: str, **constraints) -> Any:
    """A field read from DIALCHECK_<name>; `constraints` are pydantic's (ge, le, pattern ...)."""
    return Field(default, validation_alias=AliasChoices(ENV_PREFIX + name), description=doc, **constraints)


class Section(BaseSettings):
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

