"""Settings in sections, each field with its DIALCHECK_* variable, default, range and doc.

One module per section (as faust/types/settings does): schemas/settings/<section>.py holds that
section's fields, so a new setting goes into the module named after its section. Nothing is read
at import time: commands call `load_settings()` when they run, so `--help` works whatever the
environment says. `from schemas.settings import X` reads every name as before.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, PrivateAttr, SecretStr, ValidationError
from pydantic_settings import SettingsError

from schemas.settings.base import (ENV_PREFIX, REPO_ROOT, Section, SettingsInvalid, env, redact, variable_names,
                                   warn_unknown_variables)
from schemas.settings.claims import ClaimSettings
from schemas.settings.data import SHARED_DATA_DIR, DataSettings, user_data_dir
from schemas.settings.decision import DecisionSettings
from schemas.settings.gate import GateSettings
from schemas.settings.grounding import GroundingSettings
from schemas.settings.kafka import KafkaSettings
from schemas.settings.llm import LLMSettings
from schemas.settings.models import ModelSettings
from schemas.settings.perf import PerfSettings
from schemas.settings.retrieval import RetrievalSettings
from schemas.settings.stages import StageSettings
from schemas.settings.stream import StreamSettings
from schemas.settings.ui import UISettings
from schemas.settings.windows import WindowSettings

__all__ = ["ENV_PREFIX", "REPO_ROOT", "SECTIONS", "SHARED_DATA_DIR", "ClaimSettings", "DataSettings", "DecisionSettings",
           "GateSettings", "GroundingSettings", "KafkaSettings", "LLMSettings", "ModelSettings", "PerfSettings", "RetrievalSettings", "Section",
           "Settings", "SettingsInvalid", "StageSettings", "StreamSettings", "UISettings", "WindowSettings", "env",
           "load_settings", "redact", "user_data_dir"]

SECTIONS: dict[str, type[Section]] = {
    "data": DataSettings, "models": ModelSettings, "retrieval": RetrievalSettings, "gate": GateSettings,
    "windows": WindowSettings, "decision": DecisionSettings, "claims": ClaimSettings, "stages": StageSettings,
    "kafka": KafkaSettings, "stream": StreamSettings, "ui": UISettings,
    "perf": PerfSettings, "llm": LLMSettings, "grounding": GroundingSettings,
}


class Settings(BaseModel):
    """All sections. Build with `load_settings()`; derive variants with `updated()`."""
    model_config = ConfigDict(frozen=True)
    data: DataSettings
    models: ModelSettings
    retrieval: RetrievalSettings
    gate: GateSettings
    windows: WindowSettings
    decision: DecisionSettings
    claims: ClaimSettings
    stages: StageSettings
    kafka: KafkaSettings
    stream: StreamSettings
    ui: UISettings
    perf: PerfSettings
    llm: LLMSettings
    grounding: GroundingSettings
    # whether a decision file was named (DIALCHECK_DECISION_PARAMS, or decision.decision_params passed in)
    _decision_named: bool = PrivateAttr(default=False)

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
        named = self._decision_named or (sections.get("decision") or {}).get("decision_params") is not None
        return _decision_beside_model(self.model_copy(update=new), named)

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
        if not self._decision_named:  # the child resolves it from the model dir, as this one did
            del out[_env_name(DecisionSettings.model_fields["decision_params"])]
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


def _raw(section: Section) -> dict[str, Any]:
    return {k: getattr(section, k) for k in type(section).model_fields}


def _one_line(err: ValidationError, section: type[Section]) -> str:
    e = err.errors()[0]
    where = str(e["loc"][0]) if e["loc"] else section.__name__
    if not where.startswith(ENV_PREFIX):
        info = section.model_fields.get(where)
        where = _env_name(info) if info else where
    got = e.get("input")
    got = "" if isinstance(got, dict) or got is None else f" (got {_masked(str(got))[:80]!r})"
    return f"invalid setting {where}: {e['msg']}{got}"


def _masked(value: str) -> str:
    """A refused value as it may be quoted: URL credentials masked (`redact`), and so is a
    user:password@ given without a scheme ('u:pw@h:1', which a URL rule does not see)."""
    parts = re.split(r"([,;\s]+)", redact(value))
    return "".join("***@" + p.rsplit("@", 1)[1] if "@" in p and "://" not in p else p for p in parts)


def _build(section: type[Section], values: dict[str, Any] | None = None) -> Section:
    try:
        return section(**(values or {}))
    except ValidationError as err:
        raise SettingsInvalid(_one_line(err, section)) from None
    except SettingsError as err:
        raise SettingsInvalid(f"invalid setting: {redact(str(err)).splitlines()[0]}") from None


def load_settings(**sections: dict[str, Any]) -> Settings:
    """Defaults ← DIALCHECK_* environment ← explicit overrides per section. Raises SettingsInvalid."""
    warn_unknown_variables(n for cls in SECTIONS.values() for n in variable_names(cls))
    base = Settings(**{name: _build(cls) for name, cls in SECTIONS.items()})
    base = _decision_beside_model(base, named=ENV_PREFIX + "DECISION_PARAMS" in os.environ)
    return base.updated(**sections) if sections else base


_SHIPPED_DECISION = DecisionSettings.model_fields["decision_params"].default


def _decision_beside_model(settings: Settings, named: bool) -> Settings:
    """The decision file the settings mean when none is named: the one beside the NLI model when
    its folder has one, else the shipped one. A folder written by `dialcheck nli adopt` carries the
    decision fitted for that model's probabilities (and its display beside it, which
    `load_display` then reads), so `DIALCHECK_NLI_MODEL_DIR=DIR` alone is enough; a decision that is
    named (DIALCHECK_DECISION_PARAMS, or `decision.decision_params` passed in) is always the one used."""
    if not named:
        beside = Path(settings.models.nli_model_dir) / "decision.json"
        want = str(beside) if beside.is_file() else _SHIPPED_DECISION
        if settings.decision.decision_params != want:
            decision = settings.decision.model_copy(update={"decision_params": want})
            settings = settings.model_copy(update={"decision": decision})
    settings._decision_named = named
    return settings
