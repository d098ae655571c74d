"""The store-level conformance suite (``engramdb.testing``) on every store, both faces.

``target`` (conftest.py) is a fresh, empty store of each kind in each face; these tests
only run the shipped checks, so a third-party store runs exactly the same ones.
"""

from __future__ import annotations

import pytest

from engramdb.testing import STORE_CHECKS, StoreCheck, StoreUnderTest, differential_check


@pytest.mark.parametrize("check", STORE_CHECKS, ids=str)
async def test_store_protocol(check: StoreCheck, target: StoreUnderTest) -> None:
    reason = check.applies(target)
    if reason is not None:
        pytest.skip(reason)
    await check.run(target)


@pytest.mark.parametrize("seed", range(4))
async def test_same_answers_as_the_in_memory_store(seed: int, target: StoreUnderTest) -> None:
    await differential_check(target, seed=seed)
