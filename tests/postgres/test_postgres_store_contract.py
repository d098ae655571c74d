"""The store-level conformance suite (``engramdb.testing``) on ``PostgresStore``, both faces.

The tests of tests/contract/test_store_contract.py are collected here unchanged; this
directory's conftest gives them a fresh database per test.
"""

from __future__ import annotations

from test_store_contract import *  # noqa: F403
