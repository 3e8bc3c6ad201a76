"""What every settings section shares: its DIALCHECK_* prefix, the field helper, masking.

Why pydantic-settings: values are checked when they are loaded (choices, ranges), a bad value
becomes one line that names the variable (`SettingsInvalid`), and nothing is read at import time.
Secrets (SASL password, credentials inside URLs) are masked in every repr and in `as_table()`."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

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


class SettingsInvalid(ValueError):
    """A setting that cannot be used; the message is one line naming the variable."""


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

