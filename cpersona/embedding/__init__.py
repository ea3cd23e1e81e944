"""Embedding backends: bundled in-process models, the HTTP /embed contract, and none."""
