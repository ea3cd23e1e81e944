"""A write whose vector stands for only the opening of its text says so (`embedded_chars`)."""

from __future__ import annotations

from quality_helpers import HashEmbedder, make


class Capped(HashEmbedder):
    """Hashing backend that embeds at most `max_chars` characters of a text, as the bundled models do."""

    max_chars = 40

    def embed(self, texts):
        return super().embed([t[: self.max_chars] for t in texts])


def test_store_update_and_archive_name_the_embedded_part_of_a_long_text(tmp_path):
    eng = make(tmp_path / "cap.db", embedder=Capped("capped"), task_queue_enabled=False)
    try:
        long_text = "ferry timetable " * 10  # 160 characters
        out = eng.store("a", long_text)
        assert out["embedded"] is True and out["embedded_chars"] == 40
        short = eng.store("a", "a short fact")
        assert short["embedded"] is True and "embedded_chars" not in short
        changed = eng.update_memory(short["id"], "harbor notes " * 5)
        assert changed["ok"] is True and changed["embedded_chars"] == 40
        assert "embedded_chars" not in eng.update_memory(short["id"], "short again")
        episode = eng.archive_episode("a", "session summary " * 4)
        assert episode["ok"] is True and episode["embedded_chars"] == 40
    finally:
        eng.close()


def test_a_backend_without_a_cap_never_reports_one(tmp_path):
    eng = make(tmp_path / "plain.db", embedder=HashEmbedder("plain"), task_queue_enabled=False)
    try:
        assert "embedded_chars" not in eng.store("a", "x" * 5000)
    finally:
        eng.close()


def test_a_row_kept_without_a_vector_reports_no_embedded_part(tmp_path):
    eng = make(tmp_path / "none.db", embedder=None)
    try:
        out = eng.store("a", "ferry timetable " * 10)
        assert out["embedded"] is False and "embedded_chars" not in out
    finally:
        eng.close()
