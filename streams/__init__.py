"""Kafka side of dialcheck: topics, the Faust worker, replay, verdict consumption.

Kafka lives here and only here; NLP lives in `workers/`. The worker knows the pipeline only through
the `Checker` protocol (schemas/protocols.py): it calls `check_turns(list[CheckItem])`, a
`TurnResult` per turn whose verdicts (each claim's, then the turn summary) are all published.
`dialcheck eval` and `dialcheck check` call the same Pipeline, so the stream and the evaluator give
identical turn verdicts for identical input.
"""
