"""Helpers with no knowledge of the rest of cpersona: time, text, JSON."""
