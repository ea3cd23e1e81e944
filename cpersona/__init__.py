"""cpersona — persistent memory for LLM agents, served over MCP.

The package is split into a plain-Python core (`cpersona.core`: configuration, storage,
retrieval, embedding) that knows nothing of MCP, and a thin MCP layer (`cpersona.mcp`)
that validates tool arguments and calls the core.
"""

__version__ = "0.1.0"
