"""The bodies write tools answer while persistence is paused ("off the record"): each tool's
success skeleton, turned by `Pause.skipped` into `persisted: false`, `dry_run: true`, ids
`"no-persist"` / null and a reason. One table, so every write tool behaves the same."""

from __future__ import annotations

from typing import Any

from cpersona.policy.pause import Pause

#: tool → its success skeleton (fields known only per call are passed to `skipped_body`).
SKIPPED: dict[str, dict[str, Any]] = {
    "store": {"ok": True, "result": "skipped", "id": None, "embedded": False},
    "declare_associations": {"ok": True, "result": "skipped", "entities": [], "mentions": 0, "relations": [],
                             "dropped": []},
    "archive_episode": {"ok": True, "queued": False, "task_id": None, "episode_id": None, "id": None,
                        "embedded": False},
    "update_memory": {"ok": True, "updated_id": None},
    "delete_memory": {"ok": True, "deleted_id": None},
    "delete_episode": {"ok": True, "deleted_id": None},
    "lock_memory": {"ok": True, "locked_id": None},
    "unlock_memory": {"ok": True, "unlocked_id": None},
    "update_profile": {"ok": True, "profiles_updated": 0},
    "delete_agent_data": {"ok": True, "agent_id": None, "deleted_memories": 0, "deleted_profiles": 0,
                          "deleted_episodes": 0, "deleted_pending_tasks": 0, "deleted_calibration": 0},
    "calibrate_threshold": {"ok": True, "sidecar_persisted": False, "scope": None, "agent_id": None,
                            "sampled_embeddings": 0, "num_pairs": 0, "method": None, "z_factor": None,
                            "percentile": None, "embedding_dim": None, "distribution": None,
                            "null_admit_rate": None, "new_threshold": None},
    "set_recall_precision": {"ok": True, "fused_gate": None, "calibrate": None},
    "import_memories": {"ok": True, "imported_memories": 0, "skipped_memories": 0, "imported_episodes": 0,
                        "skipped_episodes": 0, "profile_updated": False},
    "merge_memories": {"ok": True, "source_agent_id": None, "target_agent_id": None, "strategy": None, "mode": None,
                       "merged_memories": 0, "skipped_memories": 0, "merged_episodes": 0, "skipped_episodes": 0,
                       "profile_copied": False, "skipped_profile": False},
}


def skipped_body(pause: Pause, tool: str, **fields: Any) -> Any:
    """The skipped body of `tool` while paused (its skeleton updated with `fields`), else
    None. Typed `Any`: it has the shape of whatever body the tool answers."""
    if not pause.active():
        return None
    return pause.skipped(tool, {**SKIPPED[tool], **fields})
