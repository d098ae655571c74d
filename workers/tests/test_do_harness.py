"""The Durable Object SQL stand-in of workers/tests/run.mjs, as a Python Durable Object sees it.

``engramdb_harness.newDurableObjectState(name)`` is a synchronous JS ``DurableObjectState``
whose every statement runs in workerd's real SQLite-backed Durable Object (miniflare, in a
worker thread; workers/tests/do_sql.mjs). These tests go through the ``workers`` SDK's own
wrappers (``DurableObject`` subclass -> ``DurableObjectContext`` -> ``_BindingWrapper``) and
pin down what a Python ``DurableObjectStore`` can rely on: the values that arrive, the
errors workerd's authorizer raises, and ``transactionSync``.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import engramdb_harness
import pytest
from js import Object
from pyodide.ffi import JsException, to_js
from workers import DurableObject

_names = itertools.count()


def fresh_name(label: str = "t") -> str:
    """A name no other test uses: a fresh, empty object."""
    return f"test-do-harness-{label}-{next(_names)}"


class Probe(DurableObject):
    """A Python Durable Object as a Worker declares one (the SDK wraps ctx and env)."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)


def new_object(name: str) -> Probe:
    env = to_js({}, dict_converter=Object.fromEntries)
    return Probe(engramdb_harness.newDurableObjectState(name), env)


@pytest.fixture
def obj() -> Probe:
    return new_object(fresh_name())


def test_the_sdk_wraps_the_stand_in_as_in_production(obj: Probe) -> None:
    from workers.entrypoints import DurableObjectContext
    from workers.rpc import _BindingWrapper

    assert isinstance(obj.ctx, DurableObjectContext)
    assert isinstance(obj.ctx.storage, _BindingWrapper)
    assert obj.ctx.storage._real_name == "DurableObjectStorage"
    assert obj.ctx.storage.sql._real_name == "SqlStorage"
    cursor = obj.ctx.storage.sql.exec("SELECT 1 AS one")
    assert cursor._real_name == "SqlStorageCursor"
    assert len(str(obj.ctx.id.toString())) == 64


def test_create_insert_select(obj: Probe) -> None:
    sql = obj.ctx.storage.sql
    sql.exec("CREATE TABLE items (id INTEGER PRIMARY KEY, text TEXT NOT NULL, score REAL)")
    written = sql.exec("INSERT INTO items (text, score) VALUES (?, ?), (?, ?)", "a", 1.5, "b", None)
    assert written.rowsWritten == 2
    cursor = sql.exec("SELECT id, text, score FROM items ORDER BY id")
    assert cursor.columnNames == ["id", "text", "score"]
    rows = cursor.toArray()
    assert rows == [{"id": 1, "text": "a", "score": 1.5}, {"id": 2, "text": "b", "score": None}]
    assert rows[0].text == "a"  # the SDK's attribute-access dicts
    assert [list(r) for r in sql.exec("SELECT id, text FROM items ORDER BY id").raw()] == [
        [1, "a"],
        [2, "b"],
    ]
    assert sql.exec("SELECT id, text FROM items ORDER BY id").raw().toArray() == [
        [1, "a"],
        [2, "b"],
    ]
    assert [r["id"] for r in sql.exec("SELECT id FROM items ORDER BY id")] == [1, 2]
    assert sql.exec("SELECT count(*) AS n FROM items").one() == {"n": 2}
    with pytest.raises(JsException, match=r"exactly one result.*no results"):
        sql.exec("SELECT id FROM items WHERE id = 99").one()
    with pytest.raises(JsException, match=r"exactly one result.*multiple results"):
        sql.exec("SELECT id FROM items").one()
    assert sql.databaseSize > 0


def test_values_round_trip(obj: Probe) -> None:
    sql = obj.ctx.storage.sql
    sql.exec("CREATE TABLE v (k TEXT PRIMARY KEY, x)")
    payload = bytes(range(256)) * 3
    sql.exec("INSERT INTO v VALUES ('blob', ?), ('empty', ?)", payload, b"")
    row = sql.exec("SELECT x, typeof(x) AS t FROM v WHERE k = 'blob'").one()
    assert row.t == "blob"
    assert isinstance(row.x, memoryview)  # the ArrayBuffer, converted by the SDK
    assert bytes(row.x) == payload
    assert bytes(sql.exec("SELECT x FROM v WHERE k = 'empty'").one().x) == b""
    inf = sql.exec("SELECT ? AS a, ? AS b, typeof(?) AS t", math.inf, -math.inf, math.inf).one()
    assert (inf.a, inf.b, inf.t) == (math.inf, -math.inf, "real")
    # SQLite has no NaN: it binds as NULL.
    assert sql.exec("SELECT ? AS a, typeof(?) AS t", math.nan, math.nan).one() == {
        "a": None,
        "t": "null",
    }
    # Every number binds as REAL (a JS double); an INTEGER column stores it as an integer.
    assert sql.exec("SELECT typeof(?) AS t", 7).one().t == "real"
    # Python True arrives in workerd as a JS boolean and is bound as the TEXT 'true'.
    assert sql.exec("SELECT ? AS b, typeof(?) AS t", True, True).one() == {
        "b": "true",
        "t": "text",
    }
    assert sql.exec("SELECT 9007199254740993 AS big").one().big == 9007199254740992
    # A Python int >= 2**53 becomes a BigInt, which workerd refuses.
    with pytest.raises(JsException, match="BigInt"):
        sql.exec("SELECT ?", 2**53)


def test_fts5_match_and_bm25(obj: Probe) -> None:
    sql = obj.ctx.storage.sql
    sql.exec("CREATE VIRTUAL TABLE docs USING fts5(body)")
    for body in ["the cat sat", "a dog barked at the cat", "birds sing"]:
        sql.exec("INSERT INTO docs (body) VALUES (?)", body)
    rows = sql.exec(
        "SELECT body, bm25(docs) AS rank FROM docs WHERE docs MATCH ? ORDER BY rank", "cat"
    ).toArray()
    assert {r.body for r in rows} == {"the cat sat", "a dog barked at the cat"}
    assert all(isinstance(r["rank"], float) and r["rank"] < 0 for r in rows)


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        ("PRAGMA user_version", "not authorized"),
        ("PRAGMA user_version = 3", "not authorized"),
        ("PRAGMA journal_mode = WAL", "not authorized"),
        ("BEGIN", "transactionSync"),
        ("SAVEPOINT s", "transactionSync"),
    ],
)
def test_the_authorizer_refuses(obj: Probe, statement: str, message: str) -> None:
    with pytest.raises(JsException, match=message):
        obj.ctx.storage.sql.exec(statement)


def test_a_statement_error_is_workerds(obj: Probe) -> None:
    with pytest.raises(JsException, match="no such table: missing"):
        obj.ctx.storage.sql.exec("SELECT * FROM missing")


def test_transaction_sync_commits_and_returns(obj: Probe) -> None:
    sql = obj.ctx.storage.sql
    sql.exec("CREATE TABLE t (v INTEGER)")

    def work() -> int:
        sql.exec("INSERT INTO t VALUES (1)")
        sql.exec("INSERT INTO t VALUES (2)")
        return sql.exec("SELECT count(*) AS n FROM t").one().n

    assert obj.ctx.storage.transactionSync(work) == 2
    assert sql.exec("SELECT sum(v) AS s FROM t").one().s == 3


def test_transaction_sync_rolls_back_on_a_python_exception(obj: Probe) -> None:
    sql = obj.ctx.storage.sql
    sql.exec("CREATE TABLE t (v INTEGER)")
    sql.exec("INSERT INTO t VALUES (0)")

    class Boom(Exception):
        pass

    def work() -> None:
        sql.exec("INSERT INTO t VALUES (1)")
        sql.exec("UPDATE t SET v = v + 10")
        assert sql.exec("SELECT count(*) AS n FROM t").one().n == 2  # seen inside
        raise Boom("stop")

    with pytest.raises(Boom, match="stop"):
        obj.ctx.storage.transactionSync(work)
    assert sql.exec("SELECT v FROM t").raw().toArray() == [[0]]
    # The object is usable afterwards, inside and outside a transaction.
    obj.ctx.storage.transactionSync(lambda: sql.exec("INSERT INTO t VALUES (5)") and None)
    assert sql.exec("SELECT count(*) AS n FROM t").one().n == 2


def test_a_callback_returning_a_cursor_breaks_the_sdk_after_the_commit(obj: Probe) -> None:
    # SDK 1.9.5: transactionSync's result goes through python_from_rpc, which cannot take
    # back an SDK-wrapped object (here the cursor) the callback returned. The transaction
    # has committed by then. Callbacks should return plain values (or None).
    sql = obj.ctx.storage.sql
    sql.exec("CREATE TABLE t (v INTEGER)")
    with pytest.raises(AttributeError):
        obj.ctx.storage.transactionSync(lambda: sql.exec("INSERT INTO t VALUES (1)"))
    assert sql.exec("SELECT count(*) AS n FROM t").one().n == 1


def test_a_failing_statement_inside_a_transaction_can_be_caught(obj: Probe) -> None:
    sql = obj.ctx.storage.sql
    sql.exec("CREATE TABLE t (v INTEGER UNIQUE)")

    def work() -> None:
        sql.exec("INSERT INTO t VALUES (1)")
        with pytest.raises(JsException, match="UNIQUE constraint failed"):
            sql.exec("INSERT INTO t VALUES (1)")
        sql.exec("INSERT INTO t VALUES (2)")

    obj.ctx.storage.transactionSync(work)
    assert sql.exec("SELECT v FROM t ORDER BY v").raw().toArray() == [[1], [2]]


def test_transaction_sync_nests(obj: Probe) -> None:
    storage, sql = obj.ctx.storage, obj.ctx.storage.sql
    sql.exec("CREATE TABLE t (v TEXT)")

    def inner_fails() -> None:
        sql.exec("INSERT INTO t VALUES ('inner-rolled-back')")
        raise ValueError("inner")

    def outer() -> None:
        sql.exec("INSERT INTO t VALUES ('outer')")
        with pytest.raises(ValueError):
            storage.transactionSync(inner_fails)
        storage.transactionSync(lambda: sql.exec("INSERT INTO t VALUES ('inner-kept')") and None)

    storage.transactionSync(outer)
    assert sql.exec("SELECT v FROM t ORDER BY v").raw().toArray() == [["inner-kept"], ["outer"]]

    def outer_fails() -> None:
        storage.transactionSync(
            lambda: sql.exec("INSERT INTO t VALUES ('committed-inner')") and None
        )
        raise RuntimeError("outer")

    with pytest.raises(RuntimeError):
        storage.transactionSync(outer_fails)
    assert sql.exec("SELECT count(*) AS n FROM t").one().n == 2


async def test_block_concurrency_while_runs_the_callback(obj: Probe) -> None:
    async def setup() -> int:
        obj.ctx.storage.sql.exec("CREATE TABLE t (v INTEGER)")
        return 7

    assert await obj.ctx.blockConcurrencyWhile(setup) == 7
    assert obj.ctx.storage.sql.exec("SELECT count(*) AS n FROM t").one().n == 0


def test_names_are_isolated_and_a_name_persists() -> None:
    name = fresh_name("persist")
    first = new_object(name)
    first.ctx.storage.sql.exec("CREATE TABLE t (v TEXT)")
    first.ctx.storage.sql.exec("INSERT INTO t VALUES ('kept')")
    other = new_object(fresh_name("other"))
    assert other.ctx.storage.sql.exec("SELECT count(*) AS n FROM sqlite_master").one().n == 0
    cold = new_object(name)  # a second state over the same storage, as after eviction
    assert cold.ctx.storage.sql.exec("SELECT v FROM t").one().v == "kept"
    assert str(cold.ctx.id.toString()) == str(first.ctx.id.toString())
    assert str(other.ctx.id.toString()) != str(first.ctx.id.toString())


def test_at_most_100_bound_parameters(obj: Probe) -> None:
    sql = obj.ctx.storage.sql
    hundred = ", ".join("?" * 100)
    assert len(sql.exec(f"SELECT {hundred}", *range(100)).raw().toArray()[0]) == 100
    with pytest.raises(JsException, match="too many SQL variables"):
        sql.exec(f"SELECT {hundred}, ?", *range(101))
