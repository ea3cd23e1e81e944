"""The MCP-free core: configuration, storage, embedding and retrieval."""
