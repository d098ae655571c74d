"""Fusion of ranked legs: reciprocal ranks and the convex combination of normalised
scores, their formulas, invariants and deterministic order."""

from __future__ import annotations

import math
from typing import Any

import pytest

from engramdb._base.errors import ValidationError
from engramdb.ranking._fusion import Fused, convex, rrf
from engramdb.ranking._hits import LEXICAL_FLOOR, scaled


def _ids(fused: list[Fused]) -> list[str]:
    return [item.id for item in fused]


def test_score_is_the_weighted_sum_of_reciprocal_ranks() -> None:
    """score(id) = Σ weight / (k + rank), 1-based ranks, per leg where the id appears."""
    fused = rrf({"vector": ["a", "b"], "lexical": ["b", "c"]}, k=60, weights={"lexical": 2.0})
    by_id = {item.id: item for item in fused}
    assert by_id["a"].score == round(1 / 61, 9)  # scores are rounded to 9 decimals
    assert by_id["b"].score == round(1 / 62 + 2 / 61, 9)
    assert by_id["c"].score == round(2 / 62, 9)
    assert by_id["b"].ranks == {"vector": 2, "lexical": 1}
    assert by_id["c"].ranks == {"lexical": 2}
    assert _ids(fused) == ["b", "c", "a"]


def test_an_id_repeated_in_a_leg_counts_once_at_its_best_rank() -> None:
    """Duplicates within a leg do not add score."""
    fused = rrf({"x": ["a", "b", "a"]})
    assert fused[0] == Fused("a", round(1 / 61, 9), {"x": 1})
    assert len(fused) == 2


def test_empty_input_gives_empty_output() -> None:
    """No legs, or only empty legs, fuse to nothing."""
    assert rrf({}) == []
    assert rrf({"vector": [], "lexical": []}) == []


def test_ties_break_by_best_rank_then_newest_first() -> None:
    """Equal scores: the id with the better best rank first, then newest first (ids
    descending, or by the ``newer`` key given)."""
    # Symmetric positions give exactly equal scores.
    fused = rrf({"x": ["p", "q"], "y": ["q", "p"]})
    assert _ids(fused) == ["q", "p"]
    assert fused[0].score == fused[1].score
    created = {"p": 2, "q": 1}
    assert _ids(rrf({"x": ["p", "q"], "y": ["q", "p"]}, newer=created.__getitem__)) == [
        "p",
        "q",
    ]
    legs = {"x": [("p", 1.0)], "y": [("q", 1.0)]}
    assert _ids(convex(legs, weights={})) == ["q", "p"]
    assert _ids(convex(legs, weights={}, newer=created.__getitem__)) == ["p", "q"]
    # Equal scores, different best ranks (k=1): "r" and "u" are 1/(1+1) = 0.5 at rank 1,
    # "s" is 1/(1+3) + 1/(1+3) = 0.5 at rank 3.
    fused = rrf({"z": ["r", "t", "s"], "w": ["u", "v", "s"]}, k=1)
    by_id = {item.id: item for item in fused}
    assert by_id["r"].score == by_id["s"].score == by_id["u"].score == 0.5
    assert _ids(fused)[:3] == ["u", "r", "s"]


def test_zero_weight_leg_changes_nothing() -> None:
    """A leg of weight 0 is ignored as if absent: same ids, scores, ranks and order."""
    legs = {"vector": ["a", "b", "c"], "lexical": ["c", "d"]}
    assert rrf({**legs, "extra": ["d", "a", "z"]}, weights={"extra": 0.0}) == rrf(legs)
    assert rrf(legs, weights={"lexical": 0.0}) == rrf({"vector": legs["vector"]})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"k": 0}, "k=0 must be an int >= 1"),
        ({"k": 1.5}, "k=1.5"),
        ({"k": True}, "k=True"),
        ({"weights": {"vector": -1.0}}, "'vector'=-1.0 must be a finite number >= 0"),
        ({"weights": {"vector": math.nan}}, "finite"),
        ({"weights": {"vector": math.inf}}, "finite"),
        ({"weights": {"vector": 10**400}}, "'vector'=<an integer of about 401 digits> must be"),
        ({"weights": {"vector": 1e7}}, "at most 1e+06"),
        ({"weights": {"vectr": 1.0}}, "unknown leg 'vectr'; known legs: 'lexical', 'vector'"),
    ],
)
def test_bad_arguments_raise_validation_error_naming_the_value(
    kwargs: dict[str, Any], message: str
) -> None:
    """k must be an int >= 1; weights finite, from 0 to a million (an integer of any size
    refused, never overflowed), for known legs only."""
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace("+", r"\+")):
        rrf({"vector": ["a"], "lexical": ["b"]}, **kwargs)


def _check_invariants(legs: dict[str, list[str]], k: int) -> None:
    fused = rrf(legs, k=k)
    union = {item for leg in legs.values() for item in leg}
    # A permutation of the union.
    assert sorted(_ids(fused)) == sorted(union)
    # Independent of dict order.
    assert rrf(dict(reversed(list(legs.items()))), k=k) == fused
    # Scores non-increasing.
    scores = [item.score for item in fused]
    assert scores == sorted(scores, reverse=True)
    # An item first in every (non-empty) leg is first overall.
    firsts = {leg[0] for leg in legs.values() if leg}
    if len(firsts) == 1 and all(legs.values()):
        assert fused[0].id == firsts.pop()
    # Ranks recorded are the first positions.
    for item in fused:
        for leg, rank in item.ranks.items():
            assert legs[leg].index(item.id) + 1 == rank


@pytest.mark.parametrize(
    "legs",
    [
        {"vector": ["a", "b", "c"], "lexical": ["a", "c", "d"]},
        {"vector": ["x"], "lexical": [], "recency": ["y", "x"]},
        {"one": ["b", "a", "b", "c"]},
        {"vector": ["m", "n", "o", "p"], "lexical": ["p", "o", "n", "m"]},
    ],
)
def test_rrf_invariants_on_examples(legs: dict[str, list[str]]) -> None:
    """Permutation of the union, dict-order independent, sorted, first-everywhere wins."""
    _check_invariants(legs, 60)
    _check_invariants(legs, 1)


def test_rrf_invariants_hold_for_random_legs() -> None:
    """Property test (hypothesis): the invariants hold for any legs and any k."""
    hypothesis = pytest.importorskip("hypothesis")
    st = pytest.importorskip("hypothesis.strategies")

    ids = st.text(alphabet="abcdefgh", min_size=1, max_size=2)
    legs_strategy = st.dictionaries(
        st.sampled_from(["vector", "lexical", "recency"]), st.lists(ids, max_size=8), max_size=3
    )

    @hypothesis.settings(max_examples=200, deadline=None, database=None)
    @hypothesis.given(legs=legs_strategy, k=st.integers(min_value=1, max_value=100))
    def check(legs: dict[str, list[str]], k: int) -> None:
        _check_invariants(legs, k)

    check()


def test_item_first_in_every_leg_wins_with_a_shared_first() -> None:
    """Plain (no hypothesis) check of the first-everywhere invariant on many shapes."""
    for size in range(1, 6):
        tail = [f"t{i}" for i in range(size)]
        legs = {"vector": ["top", *tail], "lexical": ["top", *reversed(tail)]}
        assert rrf(legs)[0].id == "top"


# --- convex combination of normalised scores ------------------------------------------


def test_convex_weighs_each_legs_absolute_scores() -> None:
    """An id's score is the weighted sum of its legs' scores as given (each on its
    leg's absolute scale): nothing is stretched to the query's candidates, so a leg
    whose candidates all score low adds little, and a leg of one candidate is not 1."""
    fused = convex(
        {"vector": [("a", 0.9), ("b", 0.5), ("c", 0.1)], "lexical": [("b", 0.3), ("d", 0.02)]},
        weights={"vector": 0.4, "lexical": 0.6},
    )
    by_id = {item.id: item for item in fused}
    assert by_id["a"].score == pytest.approx(0.4 * 0.9)
    assert by_id["b"].score == pytest.approx(0.4 * 0.5 + 0.6 * 0.3)
    assert by_id["c"].score == pytest.approx(0.4 * 0.1)
    assert by_id["d"].score == pytest.approx(0.6 * 0.02)
    assert by_id["b"].ranks == {"vector": 2, "lexical": 1}
    assert _ids(fused) == ["b", "a", "c", "d"]


def test_convex_does_not_stretch_a_leg_of_near_equal_scores() -> None:
    """The name case: every memory holds the one query word the lexical leg matched,
    so its scores differ only by length normalisation (noise); the leg's small
    differences stay small, and the vector leg decides (min-max would have made the
    shortest memory's 0.001 lead a full vote)."""
    fused = convex(
        {
            "vector": [("right", 0.62), ("short", 0.40), ("long", 0.38)],
            "lexical": [("short", 0.0003), ("right", 0.0002), ("long", 0.0001)],
        },
        weights={"vector": 0.4, "lexical": 0.6},
    )
    assert _ids(fused)[0] == "right"


def test_convex_keeps_the_ids_of_a_leg_of_weight_zero_after_the_others() -> None:
    """A leg of weight 0 adds no score but still contributes its ids, which follow the
    scored ones in the order of their ranks."""
    fused = convex(
        {"vector": [("z", 0.9), ("b", 0.8), ("y", 0.1)], "lexical": [("b", 5.0), ("a", 1.0)]},
        weights={"vector": 0.0, "lexical": 1.0},
    )
    assert _ids(fused) == ["b", "a", "z", "y"]


def test_convex_is_rounded_so_the_last_bits_of_a_leg_cannot_reorder() -> None:
    """Scores are rounded to 9 decimals: legs that differ only in the last bits of their
    scores (FTS5's bm25() and the Python BM25) fuse to the same scores and order."""
    legs = {"lexical": [("a", 2.0), ("b", 1.0000000000000002), ("c", 0.5)], "vector": []}
    other = {"lexical": [("a", 2.0), ("b", 1.0), ("c", 0.5)], "vector": []}
    assert convex(legs, weights={}) == convex(other, weights={})


def test_convex_counts_a_repeated_id_once_and_validates_weights() -> None:
    """An id repeated within a leg counts at its first rank; bad weights raise."""
    fused = convex({"x": [("a", 1.0), ("b", 0.5), ("a", 0.0)]}, weights={})
    assert fused[0] == Fused("a", 1.0, {"x": 1}) and len(fused) == 2
    with pytest.raises(ValidationError, match="unknown leg 'z'"):
        convex({"x": []}, weights={"z": 1.0})
    with pytest.raises(ValidationError, match="finite number >= 0"):
        convex({"x": []}, weights={"x": math.inf})


def test_in_fusion_a_lexical_share_counts_above_the_lexical_floor() -> None:
    """BM25 over the ceiling below ``LEXICAL_FLOOR`` (a minor word of the question) is 0
    in fusion, above it the part above, rescaled to end at 1; outside fusion (no floor)
    the share is as it was, so the lexical mode's scores are unchanged."""
    ceiling = 10.0
    below, above = 0.5 * LEXICAL_FLOOR * ceiling, 0.5 * ceiling
    assert scaled("lexical", below, ceiling=ceiling, lexical_floor=LEXICAL_FLOOR) == 0.0
    assert scaled("lexical", above, ceiling=ceiling, lexical_floor=LEXICAL_FLOOR) == (
        pytest.approx((0.5 - LEXICAL_FLOOR) / (1 - LEXICAL_FLOOR))
    )
    assert scaled("lexical", ceiling, ceiling=ceiling, lexical_floor=LEXICAL_FLOOR) == 1.0
    assert scaled("lexical", below, ceiling=ceiling) == pytest.approx(0.5 * LEXICAL_FLOOR)
