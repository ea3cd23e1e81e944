"""The thin MCP layer: tool schemas and argument validation over `cpersona.core`."""
