"""An export's vectors are kept only when they are sound: the model's dimension, finite, of
unit length. A damaged vector (NaN, all zero, scaled) is dropped with a note and its row is
embedded again — a NaN kept once made every recall of its agent score NaN, which is not JSON."""

from __future__ import annotations

import base64
import json
import math
from pathlib import Path

import numpy as np
import pytest
from cpersona.service.requests import RecallRequest
from cpersona.storage.codec import from_blob
from test_portability import _fill, _lines


def _damage(path: str, out: Path, vector: np.ndarray) -> str:
    lines = _lines(path)
    memory = next(x for x in lines if x.get("embedding_b64"))
    memory["embedding_b64"] = base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
    out.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines) + "\n", encoding="utf-8")
    return str(out)


@pytest.mark.parametrize("name, vector", [
    ("nan", np.full(512, np.nan)),
    ("zero", np.zeros(512)),
    ("scaled", np.full(512, 50.0 / math.sqrt(512))),
])
def test_a_damaged_vector_is_dropped_and_said(http_engine_factory, tmp_path, name, vector):
    src = http_engine_factory("src.db", export_dir=str(tmp_path))
    _fill(src)
    path = src.export_memories("a", "v.jsonl", include_embeddings=True)["path"]
    damaged = _damage(path, tmp_path / f"{name}.jsonl", vector)
    fresh = http_engine_factory(f"{name}.db", export_dir=str(tmp_path))
    out = fresh.import_memories(damaged)
    assert (out["embeddings_kept"], out["embeddings_dropped"]) == (2, 1), out
    assert "1 vectors dropped: not of the model's dimension, not finite, or not of unit length" in out["vector_note"]
    res = fresh.recall(RecallRequest("a", "harbour ferries"))
    json.dumps(res, allow_nan=False)  # no NaN anywhere in the answer
    assert res["messages"]


def test_a_dimension_written_as_text_is_read_as_a_number(http_engine_factory, tmp_path):
    src = http_engine_factory("src.db", export_dir=str(tmp_path))
    _fill(src)
    path = src.export_memories("a", "v.jsonl", include_embeddings=True)["path"]
    text = Path(path).read_text(encoding="utf-8")
    head = _lines(path)[0]
    out_path = tmp_path / "dimtext.jsonl"
    out_path.write_text(text.replace(f'"embedding_dim": {head["embedding_dim"]}',
                                     f'"embedding_dim": "{head["embedding_dim"]}"'), encoding="utf-8")
    assert f'"embedding_dim": "{head["embedding_dim"]}"' in out_path.read_text(encoding="utf-8")
    out = http_engine_factory("fresh.db", export_dir=str(tmp_path)).import_memories(str(out_path))
    assert out["embeddings_kept"] == 3, out


def test_a_stored_vector_that_is_not_finite_counts_as_no_vector():
    assert from_blob(np.full(4, np.nan, dtype="<f4").tobytes()) is None
    assert from_blob(np.array([1.0, np.inf], dtype="<f4").tobytes()) is None
    assert from_blob(np.array([0.6, 0.8], dtype="<f4").tobytes()) is not None
