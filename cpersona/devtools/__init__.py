"""Tools for tests, benchmarks and trying configurations; not used by the server itself."""
