"""The Memory-level conformance suite on ``PostgresStore``, both faces.

The tests of tests/contract/test_memory_contract.py and test_conversation_contract.py are
collected here unchanged; this
directory's conftest gives ``make_memory`` a fresh database per test.
"""

from __future__ import annotations

from test_conversation_contract import *  # noqa: F403
from test_memory_contract import *  # noqa: F403
