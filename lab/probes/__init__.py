"""Measurements of a single stage, run by hand (not by the stream)."""
