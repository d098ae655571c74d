"""The conformance suite (tests/contract/) against ``AsyncMemory(D1Store(d1), ...)``.

Every test of tests/contract/test_memory_contract.py, test_conversation_contract.py,
test_own_vectors_contract.py and test_policy_contract.py is collected here, unchanged;
this directory's conftest gives them ``memory`` / ``make_memory`` over a fresh miniflare
D1 database per test (instead of the in-memory and sqlite3 stores).
"""

import sys

sys.path.insert(0, "/mnt/project/tests/contract")

from test_conversation_contract import *  # noqa: F403
from test_memory_contract import *  # noqa: F403
from test_own_vectors_contract import *  # noqa: F403
from test_policy_contract import *  # noqa: F403
