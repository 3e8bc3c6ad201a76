"""Kafka side of dialcheck: topics, the Faust worker, replay, verdict consumption.

Kafka lives here and only here; NLP lives in `workers/`. The worker calls exactly one thing of the
pipeline: `Pipeline.check_many(list[CheckItem]) -> list[Verdict]`, the same call `dialcheck eval`
makes, so the stream and the evaluator give identical verdicts for identical input.
"""
