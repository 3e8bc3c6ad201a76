"""SIGHUP: the running worker re-reads what it serves with, without a restart: the NLI model
directory (`models.nli_model_dir`), the decision and the display together (a model directory
written beside and moved over, or a display file overwritten in place by an operator or by
`dialcheck calibrate --out`).

Faust's worker (mode.Worker) owns SIGINT, SIGTERM, SIGUSR1 and SIGUSR2, not SIGHUP, whose default action
would end the process. The checker's `reload` (schemas/protocols.py `Reload`; the Pipeline's loads
and checks the new set, then swaps it between batches, never within one), or for a checker that can
only re-read its display `reload_display` (`DisplayReload`), runs in a thread, off the event loop;
the outcome is one line on stdout, like the ready and status lines: what is now in use (the model
version first), why the reload was refused (what ran kept), or that this checker cannot reload."""
from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Callable

from schemas.protocols import DisplayReload, Reload, ReloadRefused

RELOADED = "reloaded on SIGHUP"
REFUSED = "reload refused on SIGHUP"
UNSUPPORTED = "reload not supported on SIGHUP"


async def reload_once(checker, scrub: Callable[[str], str] = str) -> str:
    """Reload the checker (model, decision and display; or its display alone); the line to print
    (never raises: the worker keeps running)."""
    if isinstance(checker, Reload):
        call = checker.reload
    elif isinstance(checker, DisplayReload):
        call = checker.reload_display
    else:
        return (f"{UNSUPPORTED}: the checker {type(checker).__name__} has no reload or reload_display; "
                f"restart the worker to use a new model or display file")
    try:
        said = await asyncio.to_thread(call)
    except ReloadRefused as e:
        return f"{REFUSED}: {scrub(str(e))}"
    except Exception as e:  # noqa: BLE001 - a bug in the checker's reload: it swaps nothing on failure
        return f"{REFUSED}: the reload failed ({type(e).__name__}: {scrub(str(e))[:300]}); what ran is kept"
    return f"{RELOADED}: {scrub(said)}"


def install(loop: asyncio.AbstractEventLoop, checker, scrub: Callable[[str], str] = str) -> bool:
    """SIGHUP → `reload_once`, its line printed. False where the platform has no SIGHUP handlers."""
    if not hasattr(signal, "SIGHUP"):
        return False
    pending: set[asyncio.Task] = set()  # the running reloads, kept referenced until done

    async def reload() -> None:
        print(await reload_once(checker, scrub), flush=True)

    def on_sighup() -> None:
        task = loop.create_task(reload())
        pending.add(task)
        task.add_done_callback(pending.discard)

    try:
        loop.add_signal_handler(signal.SIGHUP, on_sighup)
    except (NotImplementedError, RuntimeError):  # no signal handlers on this loop (not the main thread)
        return False
    return True


def write_pid_file(path: str) -> None:
    """Say this process takes SIGHUP now: its pid written (beside, then renamed) only once the handler
    is installed, since SIGHUP's default action would end a worker that is still loading. What reads
    it: `dialcheck adapt-loop --pid-file` (a promotion or rollback), or an operator's `kill -HUP`."""
    if not path:
        return
    from schemas.atomic import write_text

    write_text(path, f"{os.getpid()}\n")  # its folder was checked when the settings loaded


def remove_pid_file(path: str) -> None:
    """The worker stopped: its pid file goes, unless another process has written its own there since."""
    if not path:
        return
    try:
        if Path(path).read_text().strip() == str(os.getpid()):
            Path(path).unlink()
    except OSError:
        pass
