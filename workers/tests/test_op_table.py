"""D1Store and DurableObjectStore declare the op types their batch answers, and every
op of the protocol is among them (``engramdb.testing.check_op_table``)."""

from __future__ import annotations

import pytest

from engramdb.testing import check_op_table
from engramdb_workers.d1 import D1Store
from engramdb_workers.durable import DurableObjectStore


@pytest.mark.parametrize("store_class", [D1Store, DurableObjectStore], ids=lambda c: c.__name__)
def test_the_op_table_holds_every_op_of_the_protocol(store_class: type) -> None:
    check_op_table(store_class)
