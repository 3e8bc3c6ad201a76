"""SIGHUP: the running worker re-reads its display file (`verify.display_params`, overwritten in place by
an operator or by `dialcheck calibrate --out`) without a restart.

Faust's worker (mode.Worker) owns SIGINT, SIGTERM, SIGUSR1 and SIGUSR2, not SIGHUP, whose default action
would end the process. The checker's `reload_display` (schemas/protocols.py `DisplayReload`; the
Pipeline's swaps its policy between batches, never within one) runs in a thread, off the event loop;
the outcome is one line on stdout, like the ready and status lines: the display now in use, why the
reload was refused (the old policy kept), or that this checker cannot reload."""
from __future__ import annotations

import asyncio
import signal
from typing import Callable

from schemas.protocols import DisplayReload, ReloadRefused

RELOADED = "display reloaded on SIGHUP"
REFUSED = "display reload refused on SIGHUP"
UNSUPPORTED = "display reload not supported on SIGHUP"


async def reload_once(checker, scrub: Callable[[str], str] = str) -> str:
    """Reload the checker's display policy; the line to print (never raises: the worker keeps running)."""
    if not isinstance(checker, DisplayReload):
        return (f"{UNSUPPORTED}: the checker {type(checker).__name__} has no reload_display; "
                f"restart the worker to use a new display file")
    try:
        said = await asyncio.to_thread(checker.reload_display)
    except ReloadRefused as e:
        return f"{REFUSED}: {scrub(str(e))}"
    except Exception as e:  # noqa: BLE001 - a bug in the checker's reload: it swaps nothing on failure
        return f"{REFUSED}: the reload failed ({type(e).__name__}: {scrub(str(e))[:300]}); the old policy kept"
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
