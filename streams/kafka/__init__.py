"""The Kafka side's adapter: the only code that knows Faust's and aiokafka's internals.

- `app.py`: `KafkaApp` and `KafkaSettings`, Faust extended through its own seams (the App's Settings
  class, the Stream setting, the transports registry), its collaborators passed in.
- `acks.py`: `Acks`, the one rule for when an input is done, asked by the transport, the take loop
  and the agents.
- `internals.py`: every use of a private Faust or aiokafka name (the transport's fixes and the take
  loop), listed in `RELIED_ON` and checked against the pinned versions by tests/test_kafka_contract.py.
"""
