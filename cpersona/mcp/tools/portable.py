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

#: Writes (or overwrites) a file; repeating it writes the file again (all MCP default hints).
FILE_WRITE = ToolAnnotations()
#: Changes rows in place (dry run by default).
REPAIR = ToolAnnotations(destructive_hint=False, idempotent_hint=True)

FilePath = Annotated[StrictStr, Field(description="In the export folder.")]


def register(app: MCPServer, engine: Engine) -> None:
    """Add the four portability tools to `app`, bound to `engine`."""

    def export_memories(
        agent_id: Annotated[StrictStr, Field(description="'' = every agent.")],
        output_path: FilePath,
        include_embeddings: Annotated[StrictBool, Field(description="Also write the vectors.")] = False,
    ) -> str:
        """Write an agent's memories, episodes and profile to a cpersona-export/1.0 JSONL file."""
        return call("export_memories", lambda: engine.export_memories(agent_id, output_path, include_embeddings))

    def import_memories(
        input_path: FilePath,
        target_agent_id: Annotated[StrictStr, Field(description="'' = keep each row's agent.")] = "",
        dry_run: StrictBool = False,
    ) -> str:
        """Import a cpersona export, a knowledge-graph memory.jsonl, JSONL/CSV or a CPersona database (all or
        nothing, duplicates skipped)."""
        return call("import_memories", lambda: engine.import_memories(input_path, target_agent_id, dry_run))

    def merge_memories(
        source_agent_id: StrictStr,
        target_agent_id: StrictStr,
        strategy: Annotated[Literal["skip", "prefer_source"], Field(description="Whose profile wins.")] = "skip",
        mode: Annotated[Literal["copy", "move"], Field(description="move deletes what was copied.")] = "copy",
        dry_run: StrictBool = False,
    ) -> str:
        """Merge one agent's rows and profile into another (all or nothing, duplicates skipped)."""
        return call("merge_memories", lambda: engine.merge_memories(
            source_agent_id, target_agent_id, strategy, mode, dry_run))

    def migrate_channel_axis(
        agent_id: Annotated[StrictStr, Field(description="'' = every agent.")] = "",
        dry_run: StrictBool = True,
        globalize_unrecoverable: Annotated[StrictBool, Field(description="Unrecoverable rows → channel ''.")] = False,
    ) -> str:
        """Move memories filed under channel 'discord' by old clients to their metadata.session_id channel."""
        return call("migrate_channel_axis", lambda: engine.migrate_channel_axis(
            agent_id, dry_run, globalize_unrecoverable))

    add_tools(app, ((export_memories, FILE_WRITE), (import_memories, DELETE), (merge_memories, DELETE),
                    (migrate_channel_axis, REPAIR)))
