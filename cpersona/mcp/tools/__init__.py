"""The MCP tools, one module per group; each module's `register(app, engine)` adds its tools."""
