"""Your own vectors on ``PostgresStore``, both faces.

The tests of tests/contract/test_own_vectors_contract.py are collected here unchanged; this
directory's conftest gives ``make_memory`` a fresh database per test.
"""

from __future__ import annotations

from test_own_vectors_contract import *  # noqa: F403
