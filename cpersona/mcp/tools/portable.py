"""MCP tools that move memories between files and agents: export_memories, import_memories,
merge_memories, migrate_channel_axis.

File paths are confined to the export folder (CPERSONA_EXPORT_DIR, default
`<database folder>/exports`); a relative path is taken inside it. Import and merge are
journaled bulk writes: all or nothing, without holding up recall. The SDK runs each tool
in a worker thread, so a long import never blocks other requests.
"""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from pydantic import Field, StrictBool, StrictStr

from cpersona.mcp.registry import DELETE, add_tools
from cpersona.mcp.results import call
from cpersona.service.engine import Engine

#: Writes (or overwrites) a file; repeating it writes the file again.
FILE_WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=True)
#: Changes rows in place (dry run by default).
REPAIR = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True)

FilePath = Annotated[StrictStr, Field(description="File path inside the export folder (CPERSONA_EXPORT_DIR, default "
                                              "<database folder>/exports); a relative path is taken inside it.")]


def register(app: MCPServer, engine: Engine) -> None:
    """Add the four portability tools to `app`, bound to `engine`."""

    def export_memories(
        agent_id: Annotated[StrictStr, Field(description="The agent to export; '' = every agent.")],
        output_path: FilePath,
        include_embeddings: Annotated[StrictBool, Field(
            description="Also write each memory's vector (embedding_b64) and the model that made it; an import "
                        "into a database of the same model keeps them instead of re-embedding.")] = False,
    ) -> str:
        """Back memories up to a JSONL file (cpersona-export/1.0: a header, then memories, episodes and
        profiles), written atomically from one consistent snapshot. Works while persistence is paused.
        Returns {ok: true, path, memories, episodes, profiles, embeddings}.
        """
        return call("export_memories", lambda: engine.export_memories(agent_id, output_path, include_embeddings))

    def import_memories(
        input_path: FilePath,
        target_agent_id: Annotated[StrictStr, Field(
            description="Put every row under this agent; '' (default) = keep each row's agent_id.")] = "",
        dry_run: Annotated[StrictBool, Field(description="Decide everything, write nothing.")] = False,
    ) -> str:
        """Import memories from a file: a cpersona export (this server's or the original CPersona's 1.0 / 1.1),
        the reference MCP memory server's knowledge-graph memory.jsonl, JSONL or CSV rows {content, timestamp?,
        agent_id?, tags?}, or a CPersona database file. The whole file is checked first (size limit
        CPERSONA_MAX_IMPORT_BYTES, UTF-8, JSON, header counts): a defect anywhere imports nothing. Rows already
        present (same content or message id in the same agent/project/channel) are skipped, so a re-import adds
        nothing; imported rows are embedded in the background. Returns {ok, dry_run, format, imported_memories,
        skipped_memories, imported_episodes, skipped_episodes, profile_updated, embeddings_kept, errors?: [notes]}.
        """
        return call("import_memories", lambda: engine.import_memories(input_path, target_agent_id, dry_run))

    def merge_memories(
        source_agent_id: Annotated[StrictStr, Field(description="The agent whose rows are copied (non-empty).")],
        target_agent_id: Annotated[StrictStr, Field(description="The agent that receives them (non-empty, another "
                                                                "agent).")],
        strategy: Annotated[Literal["skip", "prefer_source"], Field(
            description="When both have a profile: skip (default) keeps the target's, prefer_source replaces it. "
                        "Rows the target already has are always skipped.")] = "skip",
        mode: Annotated[Literal["copy", "move"], Field(
            description="copy (default) keeps the source; move deletes the source rows that were copied.")] = "copy",
        dry_run: Annotated[StrictBool, Field(description="Count what would happen, write nothing.")] = False,
    ) -> str:
        """Merge one agent's memories, episodes and profile into another agent (e.g. after renaming an agent).
        All or nothing. Returns {ok, dry_run, source_agent_id, target_agent_id, strategy, mode, merged_memories,
        skipped_memories, merged_episodes, skipped_episodes, profile_copied, skipped_profile, left_at_source?,
        source_deleted?}.
        """
        return call("merge_memories", lambda: engine.merge_memories(
            source_agent_id, target_agent_id, strategy, mode, dry_run))

    def migrate_channel_axis(
        agent_id: Annotated[StrictStr, Field(description="Only this agent; '' (default) = every agent.")] = "",
        dry_run: Annotated[StrictBool, Field(description="Report only (default true).")] = True,
        globalize_unrecoverable: Annotated[StrictBool, Field(
            description="Move memories whose channel cannot be recovered to channel '' (all channels).")] = False,
    ) -> str:
        """One-time repair for memories stored under the bridge channel 'discord' by older clients: move each
        to the concrete channel named in its metadata.session_id ("<channel>:<…>"). Returns {agent_id, dry_run,
        recoverable_total, recoverable_by_channel, unrecoverable_total, invalid_metadata_total,
        invalid_metadata_ids, globalize_unrecoverable, migrated, globalized, samples}.
        """
        return call("migrate_channel_axis", lambda: engine.migrate_channel_axis(
            agent_id, dry_run, globalize_unrecoverable))

    add_tools(app, ((export_memories, FILE_WRITE), (import_memories, DELETE), (merge_memories, DELETE),
                    (migrate_channel_axis, REPAIR)))
