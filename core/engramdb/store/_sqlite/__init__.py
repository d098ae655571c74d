"""The SQLite dialect: schema, migrations and query plans as pure data and functions.

Nothing here performs I/O. Drivers (``engramdb.sqlite`` over stdlib ``sqlite3``, the D1
store over Cloudflare D1) execute what these modules yield, through the one trampoline,
and keep only the transaction boundary. Drivers reach all of it through the public
:mod:`engramdb.driver` (which takes the migrations from ``schema`` itself); the item
row, declared once, is in :mod:`engramdb.store.rows`.

* ``rows`` — statements, rows and the item row's SQL fragments;
* ``schema`` — the append-only migrations and the one algorithm that runs them;
* ``plans`` — which plan answers an op: ``writes`` (with the guards of conditional writes
  and the errors of a failed one) and ``reads``, over the SQL ``fragments`` they share;
* ``cache`` — the vector cache, tagged with per-scope generations;
* ``search`` — stepped plans: the vector search and the vector repair scan;
* ``batch`` — a batch of ops cut into the statement lists a driver runs atomically;
* ``filters`` — the filter language compiled to a SQL expression.

Integers stay far below 2**53 (D1 binds numbers as doubles), lists travel as JSON
arrays bound to one parameter, no statement binds more than :data:`MAX_PARAMS`
parameters (D1's limit) and ``None`` is never bound (older Pyodide cannot send JS
``null``): a NULL is written as a literal instead.
"""

from engramdb.store._sqlite.batch import OPS, run_batch
from engramdb.store._sqlite.cache import CacheIndex, SqliteVectorCache
from engramdb.store._sqlite.rows import MAX_PARAMS, Plan, Rows, Statement, Transaction

__all__ = [
    "MAX_PARAMS",
    "OPS",
    "CacheIndex",
    "Plan",
    "Rows",
    "SqliteVectorCache",
    "Statement",
    "Transaction",
    "run_batch",
]
