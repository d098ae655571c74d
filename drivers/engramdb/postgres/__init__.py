"""``engramdb.postgres``: the store on PostgreSQL with pgvector (extra ``postgres``).

See ``docs/postgres.md``.
"""

try:  # before any module of the package imports it
    import psycopg  # noqa: F401
except ImportError as exc:  # the extra is missing
    raise ImportError(
        "engramdb.postgres needs psycopg 3: pip install 'engramdb[postgres]'"
    ) from exc

from ._schema import MIGRATIONS, Migration
from ._store import PostgresStore

__all__ = ["MIGRATIONS", "Migration", "PostgresStore"]
