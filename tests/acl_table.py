"""The ACL classification as a test table: one row per rule (and per argument that changes
the demand), shared by the policy test and the MCP-over-HTTP test."""

from __future__ import annotations

from cpersona.policy.acl import Permission

ANY, R, RW = None, Permission.READ, Permission.READ_WRITE
#: (tool, arguments, permission needed when the caller holds the same grant on agent "team" and on
#: "*" and read-write on its own agent "own"; None = any authenticated client)
ROWS = [
    ("persistence_status", {}, ANY),
    ("get_queue_status", {}, ANY),
    ("get_operating_context", {}, ANY),
    ("check_update", {}, ANY),
    ("check_update", {"refresh": True}, ANY),
    ("check_update", {"apply": True}, RW),
    ("pause_persistence", {"ttl_seconds": 60}, RW),
    ("resume_persistence", {}, RW),
    *[(t, {"agent_id": "team", "query": "q"}, R) for t in
      ("recall", "recall_with_context", "get_contents", "get_profile", "get_recall_precision", "list_memories",
       "list_episodes")],
    ("traverse", {"agent_id": "team", "entity": "Aiko"}, R),
    ("declare_associations", {"agent_id": "team", "associations": {"entities": [{"name": "Aiko"}]}}, RW),
    ("get_session_findings", {}, R),
    *[(t, {"agent_id": "team"}, RW) for t in
      ("store", "update_profile", "archive_episode", "update_memory", "lock_memory", "unlock_memory",
       "delete_memory", "delete_episode", "delete_agent_data", "calibrate_threshold", "set_recall_precision",
       "migrate_channel_axis")],
    ("check_health", {"agent_id": "team"}, R),
    ("check_health", {"agent_id": "team", "fix": True}, RW),
    ("deep_check", {"agent_id": "team"}, R),
    ("deep_check", {"agent_id": "team", "fix": True}, RW),
    ("export_memories", {"agent_id": "team", "output_path": "x"}, RW),
    ("import_memories", {"target_agent_id": "team", "input_path": "x"}, RW),
    ("merge_memories", {"source_agent_id": "team", "target_agent_id": "own"}, R),
    ("merge_memories", {"source_agent_id": "team", "target_agent_id": "own", "mode": "move"}, RW),
]
