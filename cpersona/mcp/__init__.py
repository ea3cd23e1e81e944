"""The MCP edge: the server, tool schemas and result serialisation over the service layer."""
