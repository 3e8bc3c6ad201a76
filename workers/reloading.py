"""Reloading while running (the worker's SIGHUP): a new chain is built beside the running one, and
only a chain that loaded and checked whole is handed back for the Pipeline to swap in.

Two reloads: `reload_model` re-reads the NLI model directory (`models.nli_model_dir`: model.onnx,
tokenizer, calibration.json, and the decision.json / display.json beside it when it has them, as
`DIALCHECK_NLI_MODEL_DIR=DIR` alone picks them up at start), the decision and the display together;
`reload_display` re-reads the display file alone. Either raises ReloadRefused (one line) and leaves
the running chain as it was: a directory or file that is missing, broken, or fitted for another NLI
model is refused. The swap itself is one assignment in the Pipeline, read once per batch, so a batch
reads one model, decision and display, never a mix."""
from __future__ import annotations

import threading

import numpy as np

from schemas.protocols import ReloadRefused
from schemas.settings import Settings

from .building import Builder, Chain
from .decision.decider import DecisionModelMismatch, decision_path
from .display import display_file, load_display
from .models.factory import load_nli

# what a file or directory that cannot be used raises while loading (SettingsInvalid is a ValueError)
BROKEN = (OSError, ValueError, KeyError, TypeError, AttributeError, RuntimeError)
PROBE = ("Elvis Presley was born in Tupelo, Mississippi.", "Elvis Presley was born in Tupelo.")

_one_at_a_time = threading.Lock()  # two SIGHUPs in a row: the second builds on the first's result


def _why(e: Exception, what: str, kept: str) -> ReloadRefused:
    if isinstance(e, DecisionModelMismatch):
        return ReloadRefused(f"{what}: {e}; {kept}")
    first = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
    return ReloadRefused(f"{what} is missing or broken ({type(e).__name__}: {first}); {kept}")


def checked_nli(nli) -> None:
    """One probe pair through the new model: a (1, 3) row of probabilities, or ValueError."""
    p = np.asarray(nli.predict([PROBE[0]], [PROBE[1]]))
    if p.shape != (1, 3) or not np.all(np.isfinite(p)) or abs(float(p.sum()) - 1.0) > 1e-3:
        raise ValueError(f"the model's probe answer is not one row of three probabilities: {p.tolist()}")


def reload_model(builder: Builder, running: Chain, model_dir: str | None = None) -> Chain:
    """The chain on the NLI model in `model_dir` (default: the configured directory, re-read), with
    the decision and display that directory means, loaded and checked; ReloadRefused otherwise."""
    return reload_models([builder], [running], model_dir)[0]


def reload_models(builders: list[Builder], running: list[Chain], model_dir: str | None = None) -> list[Chain]:
    """`reload_model` for chains that share one NLI model (an e2e Pipeline's own chain and its
    grounded fv chain): the model is loaded and probed once, each builder's decision and display
    loaded for it; all are returned, or ReloadRefused and none."""
    with _one_at_a_time:
        first = running[0]
        where = model_dir or first.settings.models.nli_model_dir
        kept = f"the running model {getattr(first.nli, 'version', '?')} kept"
        try:
            settings: Settings = first.settings.updated(models={"nli_model_dir": where})
            nli = load_nli(settings)
            checked_nli(nli)
        except Exception as e:  # noqa: BLE001 - a model's files can fail in any library's way; nothing is swapped
            raise _why(e, f"the NLI model directory {where}", kept) from e
        chains = []
        for builder in builders:
            try:
                chains.append(builder.chain(settings, nli, required_display=True))
            except BROKEN as e:
                files = f"its decision ({decision_path(settings.decision, builder.protocol)}) or display " \
                        f"({display_file(settings.decision, builder.protocol)})"
                raise _why(e, files, kept) from e
        return chains


def reload_display(builder: Builder, running: Chain, display_params: str | None = None) -> Chain:
    """The running chain with the display file re-read (`decision.display_params`, or `display_params`
    to point at another file), checked against the running NLI model; ReloadRefused otherwise."""
    with _one_at_a_time:
        path = display_params or display_file(running.settings.decision, builder.protocol)
        try:
            settings = running.settings if display_params is None else \
                running.settings.updated(decision={"display_params": display_params})  # checks the file is there
            display = load_display(settings.decision, getattr(running.nli, "version", None), builder.protocol,
                                   required=True)
        except BROKEN as e:
            raise _why(e, str(path), "the old policy kept") from e
        return running.with_display(display, settings, builder.versions(running.nli, running.decision, display))


def in_words(builder: Builder, chain: Chain) -> str:
    """The display policy a chain uses, in words."""
    if chain.display is None:
        return "the constant rule (no display file)"
    return f"{display_file(chain.settings.decision, builder.protocol)} ({chain.context.model_versions['display']})"


def model_in_words(builder: Builder, chain: Chain) -> str:
    """The NLI model, decision and display a chain uses, in words (the worker's line after a reload)."""
    decision = f", decision {chain.decision.version}" if chain.decision is not None else ""
    return (f"NLI model {getattr(chain.nli, 'version', '?')} from {chain.settings.models.nli_model_dir}{decision}, "
            f"display {in_words(builder, chain)}")
