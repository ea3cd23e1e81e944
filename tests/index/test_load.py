"""`load_index` (cpersona/index/resident.py) reads the stored vectors in storage order and builds
the index in one pass (`VectorIndex.fill`): it must be the very index `add` builds row by row in
(created_at, id) order — same partitions, row order, scope codes and vectors — leaving out what
`from_blob` leaves out (a non-finite value, another length), on SQLite and PostgreSQL."""

from __future__ import annotations

import numpy as np
import pytest
from cpersona.index import resident
from cpersona.index.resident import load_index
from cpersona.index.vector_index import VectorIndex
from cpersona.storage.codec import from_blob, to_blob
from cpersona.storage.scope import Scope

from backends import db_write
from conftest import db_rows

DIM = 16
pytestmark = pytest.mark.both_backends


def _reference(db, dim: int) -> VectorIndex:
    index = VectorIndex(dim)
    with db.read() as s:
        for row in s.vectors.embedded_rows("memories", dim, (0, 0)):
            vec = from_blob(row.embedding)
            if vec is not None:
                index.add(row.id, row.agent_id, row.project_id, row.channel, row.created_at, vec)
    return index


def _same(a: VectorIndex, b: VectorIndex) -> None:
    assert a._parts.keys() == b._parts.keys() and a._where == b._where
    assert a._projects._codes == b._projects._codes and a._channels._codes == b._channels._codes
    for agent, p in a._parts.items():
        q = b._parts[agent]
        assert (p.n, p.keys, p.ordered) == (q.n, q.keys, q.ordered)
        for name in ("ids", "projects", "channels", "matrix"):
            assert np.array_equal(getattr(p, name)[: p.n], getattr(q, name)[: q.n]), (agent, name)


def test_a_loaded_index_is_the_index_add_builds(make_engine, tmp_path, monkeypatch):
    monkeypatch.setattr(resident, "LOAD_CHUNK", 64)
    engine = make_engine()
    rng = np.random.default_rng(4)
    rows = 64 * 3 + 20  # several read steps
    for i in range(rows):
        agent = ("kai", "mio", "ren")[i % 3]
        stamp = f"2026-01-{1 + i % 5:02d}T10:00:00+00:00"  # many rows share a created_at: ties by id
        engine.store(agent, f"note {i}", timestamp=stamp, project_id=("", "alpha", "beta")[i % 4 % 3],
                     channel=("", "slack")[i % 2])
    path = tmp_path / "x.db"
    ids = [r[0] for r in db_rows(path, "SELECT id FROM memories ORDER BY id")]
    vectors = rng.standard_normal((len(ids), DIM)).astype(np.float32)
    vectors[7, 3] = np.nan  # left out, as from_blob leaves it out
    for row_id, vec in zip(ids, vectors):
        db_write(path, "UPDATE memories SET embedding = ?, created_at = timestamp WHERE id = ?", (to_blob(vec), row_id))
    db_write(path, "UPDATE memories SET embedding = ? WHERE id = ?", (to_blob(vectors[0][:8]), ids[9]))  # other length
    loaded, reference = load_index(engine.db, "memories", DIM, (0, 0)), _reference(engine.db, DIM)
    _same(loaded, reference)
    assert len(loaded) == len(ids) - 2


def test_an_empty_table_loads_an_empty_index(make_engine):
    engine = make_engine()
    assert len(load_index(engine.db, "memories", DIM, (0, 0))) == 0


def test_fill_refuses_an_index_that_holds_rows():
    index = VectorIndex(2)
    index.add(1, "a", "", "", "2026-01-01", np.ones(2, np.float32))
    with pytest.raises(ValueError, match="empty index"):
        index.fill(np.array([2]), ["a"], [""], [""], ["2026-01-02"], np.ones((1, 2), np.float32))
    with pytest.raises(ValueError, match="matrix"):
        VectorIndex(2).fill(np.array([2]), ["a"], [""], [""], ["x"], np.ones((1, 3), np.float32))


@pytest.mark.sqlite_only("a BLOB in a TEXT column: SQLite keeps what another program wrote")
def test_a_created_at_another_program_wrote_as_a_blob_does_not_fail_the_load(make_engine, tmp_path):
    """One row with a BLOB created_at made every agent's recall fail ('<' between bytes and str)."""
    engine = make_engine()
    for n, agent in enumerate(("kai", "kai", "solo")):
        engine.store(agent, f"note {n} of {agent}")
    path = tmp_path / "x.db"
    ids = [r[0] for r in db_rows(path, "SELECT id FROM memories ORDER BY id")]
    for row_id in ids:
        db_write(path, "UPDATE memories SET embedding = ? WHERE id = ?", (to_blob(np.ones(DIM, np.float32)), row_id))
    db_write(path, "UPDATE memories SET created_at = x'41' WHERE id = ?", (ids[-1],))
    index = load_index(engine.db, "memories", DIM, (0, 0))
    assert len(index) == 3 and index._parts["solo"].keys == ["A"]
    assert [h[0] for h in index.search(np.ones(DIM, np.float32) / 4, Scope("kai"), 10, 0.0, 10)] == ids[:2][::-1]


def test_rows_arriving_after_the_count_grow_the_matrix():
    """A write between load_index's count and its read: the matrix grows, nothing is lost."""
    from cpersona.storage.records import VectorRow

    rows = resident._Rows(4, 1)
    made = [VectorRow(i, "a", "", "", f"2026-01-0{i}", to_blob(np.full(4, i, np.float32))) for i in range(1, 6)]
    rows.add(made[:2])
    rows.add(made[2:])
    ids, agents, _, _, keys, matrix = rows.finite()
    assert agents == ["a"] * 5
    assert ids.tolist() == [1, 2, 3, 4, 5] and keys == [r.created_at for r in made]
    assert matrix[:, 0].tolist() == [1, 2, 3, 4, 5]
