"""The service layer: every tool's behaviour, written once for the MCP tools and the CLI.
`Engine` (service/engine.py) is the composition root that wires the layers below."""
