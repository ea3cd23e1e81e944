"""cpersona — persistent memory for LLM agents, served over MCP.

Layers (docs/architecture.md): `mcp` and `cli` are thin edges over `service`, which
composes `calibration` and `jobs`, which use `retrieval`, `index`, `embedding` and
`policy`, which sit on `storage` (the only layer that writes SQL), which sits on `config`,
`errors` and `util`.
"""

__version__ = "0.1.0"
#: The distribution name on the package index (`pip install cpersona-memory`); the import name
#: and the command stay `cpersona`. The name `cpersona` on the index is the original project.
DISTRIBUTION = "cpersona-memory"
