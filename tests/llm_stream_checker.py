"""The real Pipeline with the LLM stage on, for the LLM stages' stream tests (`dialcheck worker
--pipeline tests.llm_stream_checker:create --protocol fv --surface r5g`), plus one trigger: a claim
containing STANDIN-KILL SIGKILLs the worker on every delivery (the poison-quarantine case of
tests/test_stream_resilience.py). Everything else is the real pipeline: real models, the R5 stage
talking to the LLM endpoint in DIALCHECK_LLM_URL (the test's local stand-in server)."""
from __future__ import annotations

import os
import signal


class KillableChecker:
    def __init__(self, pipeline):
        self.pipeline = pipeline

    def check_turns(self, items):
        if any("STANDIN-KILL" in it.claim for it in items):
            os.kill(os.getpid(), signal.SIGKILL)
        return self.pipeline.check_turns(items)


def create(settings, protocol: str = "fv", surface: str = "r5g"):
    from workers.pipeline import Pipeline

    return KillableChecker(Pipeline.from_settings(settings, protocol=protocol, surface=surface))
