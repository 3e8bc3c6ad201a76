"""Evaluation: metrics over run rows, run files, plots — computed from the same rows `eval` and `score` write."""
