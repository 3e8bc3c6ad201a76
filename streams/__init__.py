"""Kafka side of dialcheck: topics, the Faust worker, replay, verdict consumption.

Kafka lives here and only here; NLP lives in `workers/`. The worker knows the pipeline only through
the `Checker` protocol (schemas/protocols.py): it calls `check_turns(list[CheckItem])` (every verdict
to publish per turn: each claim's, then the turn summary) when the checker is a `ClaimChecker`, as
the Pipeline is, else `check_many(list[CheckItem]) -> list[Verdict]`. `dialcheck eval` calls the
same Pipeline (`check_many` is the last verdict of each turn's `check_turns`), so the stream and
the evaluator give identical turn verdicts for identical input.
"""
