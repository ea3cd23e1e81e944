"""Edges to agent hosts beside MCP: the local endpoint a running server answers for this
user's hooks and CLI (endpoint.py, operations.py), the hook commands of Claude Code
(claude_code.py, hookrun.py: the fast client), installing them (settings_file.py) and the
memory-policy snippet for AGENTS.md / CLAUDE.md (policy_snippet.py). docs/memory-without-asking.md."""

#: The hook events that only read stored memory (with no database file yet they print nothing).
READ_EVENTS = frozenset({"SessionStart", "UserPromptSubmit"})
