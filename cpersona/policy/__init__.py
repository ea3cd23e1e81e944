"""Policy: the rules every entry point applies before touching storage — argument
validation, write drafts, the no-persist pause, and the operating context's project rules."""
