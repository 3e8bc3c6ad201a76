"""How the stages run: their declared contracts checked while they run (tests, debugging)."""
from __future__ import annotations

from schemas.settings.base import Section, env


class StageSettings(Section):
    check_contracts: bool = env("CHECK_CONTRACTS", False,
                                 "Run every stage on checked views of the claim states: a stage that reads or writes a "
                                 "field its @component does not declare fails (workers/state.py). For tests and "
                                 "debugging; the test suite turns it on.")
