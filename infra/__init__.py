"""Deployment helpers: the bundled Triton launcher, compose stack docs, GPU model-repository overlay."""
