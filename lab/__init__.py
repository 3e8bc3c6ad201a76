"""The offline half of dialcheck: what is run by people, never by the stream.

- `lab.nli`: training, pair builders, release, calibration, probes of dialcheck's own NLI model;
- `lab.tuning`: caches, cross-validation, leave-one-dataset-out, the decision fits and their cards;
- `lab.evaluation`: metrics, run files (and hostile-run-file validation), plots and figures;
- `lab.probes`: one-off measurements of a stage (R4's antecedent proxy).

It may import `schemas` and `workers`; nothing in `schemas`, `workers` or `streams` imports it
(tests/test_layers.py), so the runtime never loads training or evaluation code."""
