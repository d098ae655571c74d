"""``engramdb.postgres``: the store on PostgreSQL with pgvector (extra ``postgres``).

See ``docs/postgres.md``.
"""

from ._store import PostgresStore

__all__ = ["PostgresStore"]
