"""The rules of a declaration (policy/associations.py): the one form names are compared in,
record refs, the checks of an item and the bounds of a call."""

from __future__ import annotations

from cpersona.policy import associations as rules


def test_normalize_is_nfkc_casefolded_with_whitespace_collapsed():
    assert rules.normalize("  Aiko\u3000\tTANAKA \n") == "aiko tanaka"
    assert rules.normalize("ＡＩＫＯ") == "aiko" and rules.normalize("Straße") == "strasse"
    assert rules.normalize("決済チーム") == "決済チーム" and rules.normalize("ｹｯｻｲ") == "ケッサイ"


def test_record_refs():
    assert rules.parse_ref(" mem:007 ") == ("mem", 7) and rules.canonical_ref("ep:12") == "ep:12"
    for bad in ("mem:", "mem:x", "MEM:1", "note:1", 12, None, "mem:-1", f"mem:{2**63}"):
        assert rules.parse_ref(bad) is None, bad
    assert rules.looks_like_ref(f"mem:{2**63}") and not rules.looks_like_ref("Aiko")


def test_texts_and_ids():
    assert rules.text("  Aiko ") == "Aiko"
    for bad in ("", "   ", "x" * 257, "a\x00b", "\ud800", 5, None):
        assert rules.text(bad) is None, bad
    assert rules.is_id(3) and not rules.is_id(True) and not rules.is_id(0) and not rules.is_id(2**63)


def test_bounds_are_reported_after_the_items_within_them():
    dropped: list[rules.Dropped] = []
    taken = [index for index, _ in rules.bounded(list(range(66)), "entities", dropped)]
    assert taken == list(range(64))
    assert [d.body() for d in dropped] == [{"item": f"entities[{i}]", "reason": "beyond the 64-item bound"}
                                           for i in (64, 65)]
    assert list(rules.bounded("x", "relations", dropped)) == [] and dropped[-1].item == "relations"
    assert list(rules.bounded(None, "relations", dropped)) == []


def test_scopes_a_declaration_reuses_most_specific_first():
    assert rules.visible_scopes("ops", "#web") == [("ops", "#web"), ("ops", ""), ("", "#web"), ("", "")]
    assert rules.visible_scopes("", "") == [("", "")]
