"""``engramdb similar ID``: the memories of the bound scope nearest in meaning to memory
ID, by its text through a vector recall of the bound view; never ID itself.

The CLI runs in process (the ``cli`` fixture of ``conftest.py``).
"""

from __future__ import annotations

import json
from collections.abc import Callable

Cli = Callable[..., tuple[int, str, str]]

FACTS = [
    "Sam is vegetarian and loves mushroom risotto",
    "Sam loves mushroom risotto on Fridays",
    "Sam is vegetarian",
    "the deploy window is Tuesday",
]


def remember_all(cli: Cli, scope: str, texts: list[str]) -> list[str]:
    ids = []
    for text in texts:
        status, out, err = cli("--scope", scope, "remember", text)
        assert status == 0, err
        ids.append(out.strip())
    return ids


def test_similar_ranks_the_others_by_meaning_and_never_the_memory_itself(cli: Cli) -> None:
    """The nearest memories by vector similarity, best first, without ID; --top-k N
    gives at most N of them."""
    ids = remember_all(cli, "acme", FACTS)
    status, out, err = cli("--scope", "acme", "--json", "similar", ids[0], "--top-k", "3")
    assert status == 0, err
    hits = [json.loads(line) for line in out.splitlines()]
    assert [h["memory"]["id"] for h in hits] == [ids[1], ids[2], ids[3]]
    similarities = [h["similarity"] for h in hits]
    assert similarities == sorted(similarities, reverse=True) and similarities[0] > 0.5
    status, out, _ = cli("--scope", "acme", "similar", ids[0], "--top-k", "1")
    assert out.startswith("1. ") and FACTS[1] in out and out.count("\n") == 1
    assert FACTS[0] not in out


def test_similar_stays_in_the_bound_scope(cli: Cli) -> None:
    """Memories of another scope are never hits, and an ID of another scope is answered
    as missing (exit 1, one line naming it), as get answers it."""
    (sam,) = remember_all(cli, "acme/sam", [FACTS[0]])
    (ana,) = remember_all(cli, "acme/ana", [FACTS[1]])
    status, out, err = cli("--scope", "acme/sam", "--json", "similar", sam)
    assert (status, out) == (0, "")
    assert "no other memory of scope acme/sam" not in err  # JSON: no human notice
    status, out, err = cli("--scope", "acme/sam", "similar", sam)
    assert (status, out) == (0, "") and "no other memory of scope acme/sam" in err
    status, out, err = cli("--scope", "acme/sam", "similar", ana)
    assert (status, out) == (1, "")
    assert err == (
        f"engramdb: error: no memory {ana!r} in scope acme/sam; check the id, or pass the "
        "memory's --scope (engramdb scopes lists them)\n"
    )
