"""The CLI wires a Checker into the stream worker: streams/ only knows the `Checker` protocol.

Default: `workers.pipeline.Pipeline.from_settings` (what `dialcheck eval` uses), imported here by
name so a reader or an import walk follows a turn from the worker into it. Another factory
(`--pipeline module:callable`, called as factory(settings, protocol=..., surface=...)) lets the
Kafka wiring be exercised or benchmarked without models; only that one is imported by its string."""
from __future__ import annotations

import importlib

from schemas.protocols import SURFACES, Checker
from schemas.settings import Settings

DEFAULT_CHECKER = "workers.pipeline:Pipeline.from_settings"


def check_surface(surface: str | None) -> None:
    """A `--surface` given on the command line must be one the Pipeline knows (None: the settings'
    `claims.surface`, checked when the settings load); said before any model loads."""
    if surface is not None and surface not in SURFACES:
        from dialcheck.errors import UsageError

        raise UsageError(f"unknown --surface {surface}: choose from {','.join(SURFACES)}")


def load_checker(settings: Settings, spec: str | None = None, protocol: str = "e2e", surface: str | None = None) -> Checker:
    """The checker `spec` builds (default: the Pipeline), at `surface` (None: `claims.surface`)."""
    surface = surface or settings.claims.surface
    if spec is None or spec == DEFAULT_CHECKER:
        from workers.pipeline import Pipeline  # the default, imported by name (not through importlib)

        return Pipeline.from_settings(settings, protocol=protocol, surface=surface)
    mod_name, _, attr = spec.partition(":")
    obj = importlib.import_module(mod_name)
    for part in (attr or "create").split("."):
        obj = getattr(obj, part)
    checker = obj(settings, protocol=protocol, surface=surface)
    if not isinstance(checker, Checker):
        raise TypeError(f"{spec!r} did not build a Checker (no check_turns)")
    return checker
