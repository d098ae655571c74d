"""The Memory-level conformance suite on ``PostgresStore``, both faces.

The tests of tests/contract/test_memory_contract.py are collected here unchanged; this
directory's conftest gives ``make_memory`` a fresh database per test.
"""

from __future__ import annotations

from test_memory_contract import *  # noqa: F403
