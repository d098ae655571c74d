"""PostgresStore declares the op types its batch answers, and every op of the protocol
is among them (``engramdb.testing.check_op_table``; no database needed)."""

from __future__ import annotations

from engramdb.postgres import PostgresStore
from engramdb.testing import check_op_table


def test_the_op_table_holds_every_op_of_the_protocol() -> None:
    check_op_table(PostgresStore)
