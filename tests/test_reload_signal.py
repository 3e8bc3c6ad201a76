"""streams/reload.py: SIGHUP on a real event loop → the checker's reload_display, one line whatever happens
(the stream test, tests/test_feedback_loop.py, sends it to a running worker)."""
import asyncio
import os
import signal

import pytest

from schemas.protocols import ReloadRefused
from streams.reload import REFUSED, RELOADED, UNSUPPORTED, install, reload_once

pytestmark = pytest.mark.unit


class Reloading:
    def __init__(self, outcome):
        self.outcome, self.calls = outcome, 0

    def check_turns(self, items):
        return []

    def reload_display(self) -> str:
        self.calls += 1
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome


class NoReload:
    def check_turns(self, items):
        return []


def test_each_outcome_is_one_line():
    said = asyncio.run(reload_once(Reloading("/etc/display.json (policy@x)")))
    assert said == f"{RELOADED}: /etc/display.json (policy@x)"
    said = asyncio.run(reload_once(Reloading(ReloadRefused("broken; the old policy kept"))))
    assert said == f"{REFUSED}: broken; the old policy kept"
    said = asyncio.run(reload_once(Reloading(RuntimeError("a bug")), scrub=lambda s: s.replace("bug", "***")))
    assert said.startswith(REFUSED) and "RuntimeError: a ***" in said and "\n" not in said
    said = asyncio.run(reload_once(NoReload()))
    assert said.startswith(UNSUPPORTED) and "NoReload" in said


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="no SIGHUP on this platform")
def test_sighup_reloads_on_the_loop(capsys):
    checker = Reloading("the new file")

    async def main() -> str:
        assert install(asyncio.get_running_loop(), checker)
        os.kill(os.getpid(), signal.SIGHUP)
        out = ""
        for _ in range(3000):  # bounds a hung reload; nothing is timed
            out += capsys.readouterr().out
            if out.endswith("\n"):
                break
            await asyncio.sleep(0.01)
        asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
        return out

    assert asyncio.run(main()) == f"{RELOADED}: the new file\n"
    assert checker.calls == 1


class ReloadingAll(Reloading):
    """A checker that re-reads its model, decision and display (`Reload`) as well as its display alone."""

    def reload(self) -> str:
        self.calls += 100
        return "NLI model v2 from /models/nli, decision d, display /models/nli/display.json (policy@x)"


def test_a_checker_that_reloads_everything_is_asked_for_everything():
    checker = ReloadingAll("display alone")
    said = asyncio.run(reload_once(checker))
    assert said == f"{RELOADED}: NLI model v2 from /models/nli, decision d, display /models/nli/display.json (policy@x)"
    assert checker.calls == 100  # reload, not reload_display
