"""Calibration of the quality gate from the corpus itself (no labels), kept per agent in a
sidecar file beside the database."""
