"""The stream keeps its promises with the LLM stage on: the worker runs the real pipeline with
R5 (`--surface r5g`) talking to the local LLM stand-in (tests/llm_standin.py, a protocol stand-in,
not a model) or to nothing at all. A turn that kills the worker on every delivery is still
quarantined as poison, and every other claim gets its verdict: with the rewrite's outcome in its
rationale when the LLM answers, degraded with the outage as its reason once it is gone."""
from __future__ import annotations

import time

import pytest

from schemas import ChatTurn, claim_id
from streams.replay import TurnProducer
from streams.verdicts import collect_verdicts, end_offsets, read_dead_letters
from streams.worker import WorkerProcess
from tests.llm_standin import LLMStandIn
from tests.test_stream_resilience import stream_settings

pytestmark = pytest.mark.broker

CHECKER = ["--pipeline", "tests.llm_stream_checker:create", "--protocol", "fv", "--surface", "r5g"]


def elvis(conv: str, claim: str) -> tuple[list[ChatTurn], ChatTurn]:
    return ([ChatTurn(conv, f"{conv}#c0", "user", "I love Elvis Presley.", check=False)],
            ChatTurn(conv, f"{conv}#r", "assistant", claim, check=True))


def wait_for_poison(s, start_d, w: WorkerProcess, log) -> tuple[WorkerProcess, int]:
    """Restart the worker each time the poison turn kills it, until its dead letter arrives; returns
    the live worker and the crash count. Bounded: a wait past POISON_WAIT_S fails with the worker's
    status line and log tail (CI once hung here for 600 s with nothing to read)."""
    crashes, deadline = 0, time.monotonic() + POISON_WAIT_S
    try:
        while not [d for d in read_dead_letters(s, start_d) if d.reason.startswith("poison")]:
            if not w.alive():
                crashes += 1
                assert crashes <= 3, "crash loop: the poison turn was never quarantined"
                # not wait_ready: a restarted worker can take the poison turn before its ready line
                # is out (killed before ready on a loaded machine); the loop counts that exit too
                w = WorkerProcess(s, log, extra_args=CHECKER).start()
            assert time.monotonic() < deadline, (
                f"no poison dead letter in {POISON_WAIT_S}s after {crashes} crashes; worker status "
                f"{w.last_status()}; log tail:\n{w.log_text()[-3000:]}")
            time.sleep(1)
    except BaseException:
        w.stop()  # the caller's `finally` holds the first worker, not a restarted one
        raise
    return w, crashes


POISON_WAIT_S = 360  # two crashes and restarts take 60-90 s on 2 quiet cores


# a broker of its own (CI ran this after 40 modules on the shared one) and one rerun, as for the
# scale-out test: kafka-python's test-side reads were seen to stall on this broker now and then.
# One worker run covers both LLM states (it used to be two runs of ~55 s each): the poison turn is
# quarantined with the LLM answering, then the LLM goes away under the same worker and a new claim
# comes back degraded with the outage as its reason, the worker still up.
@pytest.mark.timeout(900)
@pytest.mark.flaky(reruns=1)
def test_poison_turn_is_quarantined_and_no_claim_is_lost_with_the_llm_stage_on(fresh_broker, tmp_path):
    broker = fresh_broker
    with LLMStandIn() as llm:
        s = stream_settings(broker, "llm", poison_attempts=2).updated(
            llm={"url": llm.url, "timeout_s": 2.0, "retries": 0})
        start_v, start_d = end_offsets(s, s.kafka.topic_verdicts), end_offsets(s, s.kafka.topic_deadletter)
        convs = [elvis("good-1", "He was born in Tupelo"),
                 elvis("kill", "STANDIN-KILL He was born in Tupelo"),
                 elvis("good-2", "He grew up in Tupelo")]
        good = {claim_id(c.conversation_id, c.turn_id, c.text) for _, c in (convs[0], convs[2])}
        late_ctx, late = elvis("llm-down", "He died in Memphis")
        late_id = claim_id(late.conversation_id, late.turn_id, late.text)
        log = tmp_path / "worker.log"
        w = WorkerProcess(s, log, extra_args=CHECKER)
        try:
            w.start().wait_ready(300)
            with TurnProducer(s) as producer:
                for t in [*(t for ctx, _ in convs for t in ctx), *(c for _, c in convs)]:
                    producer.send_turn(t)
            w, crashes = wait_for_poison(s, start_d, w, log)
            vlog = collect_verdicts(s, good, 300, start=start_v, alive=w.alive)
            asked = sum(1 for r in llm.requests if r.get("body"))
            llm.stop()  # the LLM goes away under the running worker
            start_late = end_offsets(s, s.kafka.topic_verdicts)
            with TurnProducer(s) as producer:
                for t in [*late_ctx, late]:
                    producer.send_turn(t)
            late_log = collect_verdicts(s, {late_id}, 300, start=start_late, alive=w.alive)
            assert w.alive()
        finally:
            w.stop()
        assert crashes == 2 and good <= vlog.verdicts.keys() and not vlog.schema_errors
        assert asked > 0  # the worker really asked the LLM
        for cid in sorted(good):
            v = vlog.verdicts[cid]
            assert v.status.state == "ok" and v.rationale["r5"]["outcome"] in ("accepted", "rejected", "accepted-for-retrieval")
        v = late_log.verdicts[late_id]
        assert v.status.state == "degraded" and v.rationale["r5"]["outcome"] == "llm-unavailable"
        assert v.status.reason.startswith("R5 rewrite unavailable, R4 path used") and not late_log.schema_errors
