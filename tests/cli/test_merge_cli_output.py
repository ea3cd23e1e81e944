"""`cpersona merge --move` says in words what it left at the source (it printed a dict)."""

from cpersona.cli import merge


def test_a_move_names_what_it_left_at_the_source():
    assert merge._left({"memories": 15, "episodes": 1, "profiles": 0}) == (
        "left at source: 15 memories, 1 episode (already in the target: a move deletes only what it copied)")
    assert merge._left({"memories": 0, "episodes": 0, "profiles": 0}) == "nothing left at source"
