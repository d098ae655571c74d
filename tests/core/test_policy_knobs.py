"""Policy, Forgetting and LabelRules refuse bad knobs with one clear error, and bind()
refuses a bad authority, before anything is built or written."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from engramdb import (
    ConfigurationError,
    Forgetting,
    HashEmbedder,
    InMemoryStore,
    LabelRules,
    Memory,
    Policy,
    StoreCapabilities,
    ValidationError,
)

SAM = ("acme", "user", "sam")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Policy(reinforcement="yes"), "reinforcement='yes'"),
        (lambda: Policy(forgetting=timedelta(days=1)), "Forgetting"),
        (lambda: Forgetting(half_life=30), "half_life=30"),
        (lambda: Forgetting(half_life=timedelta(0)), "positive timedelta"),
        (lambda: Forgetting(timedelta(days=1), suppress_below=2), "suppress_below"),
        (lambda: Policy(max_items=0), "max_items"),
        (lambda: Policy(diversity=1.5), "diversity"),
        (lambda: Policy(recency_half_life=7), "recency_half_life"),
        (lambda: Policy(recency_weight=-1), "recency_weight"),
        (lambda: Policy(max_contexts=-1), "max_contexts"),
        (lambda: Policy(max_selections=0), "max_selections"),
        (lambda: Policy(selection_ttl=3600), "selection_ttl"),
        (lambda: Policy(label_rules={"topic": []}), "LabelRules"),
        (lambda: Policy(labeler="gpt"), "labeler"),
        (lambda: Policy(labeler_timeout=0), "labeler_timeout"),
        (lambda: LabelRules(allowed=["topic"]), "allowed"),
        (lambda: LabelRules(max_per_key=0), "max_per_key"),
    ],
)
def test_bad_knobs_are_refused_by_name(make: Any, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        make()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"scope": "acme"}, "tuple of strings"),
        ({"scope": SAM, "session": 42}, "session=42"),
        ({"scope": SAM, "session": "a\x00b"}, "control character"),
        ({"scope": SAM, "read": "acme"}, "scopes"),
        ({"scope": SAM, "policy": {"reinforcement": True}}, "Policy"),
    ],
)
def test_bind_refuses_a_bad_authority(arguments: dict[str, Any], message: str) -> None:
    memory = Memory(InMemoryStore(), HashEmbedder())
    scope = arguments.pop("scope")
    with pytest.raises(ValidationError, match=message):
        memory.bind(scope, **arguments)


def test_a_capacity_needs_a_policy_store() -> None:
    class Plain(InMemoryStore):
        capabilities = StoreCapabilities()

    memory = Memory(Plain(), HashEmbedder())
    with pytest.raises(ConfigurationError, match="max_items"):
        memory.bind(SAM, policy=Policy(max_items=10))
