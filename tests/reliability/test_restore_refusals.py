"""A restore is all or nothing, and as strict as the API (docs/reliability.md, "Backup
and restore").

Every value a backup line carries is held to the checks ``remember`` and ``update``
make, before anything is written: a refused file is one ``ValidationError`` naming its
first bad line, and the target is exactly as it was, on InMemoryStore, a SQLite file
and PostgreSQL. Each case below was let through by the backup reader of 0.2.0 and
failed later, in the store (a traceback, and 400 of 500 memories written) or not at all
(a value no other door accepts, stored). A file cut short or changed is refused by its
end marker. A hypothesis fuzz changes one value of one line of a good backup into a
hostile one and holds every store to the same rule: restored, or refused with nothing
written, and never another exception than an ``EngramError``.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import closing, redirect_stderr, redirect_stdout
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backup_files import backup_text, split_backup
from engramdb import EngramError, HashEmbedder, InMemoryStore, Memory, Policy, ValidationError
from engramdb.backup import backup, restore
from engramdb.cli import main as cli_main
from engramdb.settings import is_postgres
from engramdb.sqlite import SqliteStore

ITEMS = 500
BAD_AT = 449  # the 450th item: line 451 of the file
SCOPES = [("acme", "user", "sam"), ("acme", "user", "kim")]


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A backup of 500 memories with history and evidence, every one of the 15 kinds
    of value below in its ordinary form."""
    path = tmp_path_factory.mktemp("good") / "good.db"
    with Memory(SqliteStore(path), HashEmbedder(32)) as memory:
        records = memory.remember_many(
            {
                "text": f"memory {n}: tea at {n % 24}h",
                "scope": SCOPES[n % 2],
                "metadata": {"n": n, "deep": {"list": [1, 2.5, "x"]}},
                "labels": {"topic": [f"t{n % 3}"]},
            }
            for n in range(ITEMS)
        )
        for record in records[::7]:
            memory.update(record.id, text=f"{record.text}, revised")
        sam = memory.bind(SCOPES[0], policy=Policy(reinforcement=True))
        for query in ("tea", "memory", "at"):
            hits = sam.recall(query, top_k=20, labels={"topic": ["t1"]})
            assert hits.selection_id is not None
            sam.complete(hits.selection_id, 0.5)
        for record in records[:ITEMS:2]:
            memory.bind(record.scope).feedback(record.id, 0.25)
    out = io.StringIO()
    with closing(SqliteStore(path)) as store:
        backup(store, out)
    return out.getvalue()


def _with(good: str, position: int, change: Callable[[dict[str, Any]], str | None]) -> str:
    """``good`` with item ``position``'s line changed by ``change`` (which edits the
    parsed line in place, or answers the line's new raw text), end marker rewritten."""
    header, items, _end = split_backup(good)
    line = json.loads(items[position])
    raw = change(line)
    items = list(items)
    items[position] = raw if raw is not None else json.dumps(line, separators=(",", ":"))
    return backup_text(header, items)


def _record(line: dict[str, Any]) -> dict[str, Any]:
    record: dict[str, Any] = line["record"]
    record.pop("content_sha256", None)  # recomputed from the text: the check it reaches
    return record


def _evidence(line: dict[str, Any]) -> dict[str, Any]:
    utility: dict[str, Any] = line["utility"]
    assert utility is not None, "the case needs an item with evidence"
    return utility


def _raw(line: dict[str, Any], marker: str, value: str) -> str:
    """The line with the JSON string ``marker`` replaced by raw JSON ``value``."""
    return json.dumps(line, separators=(",", ":")).replace(json.dumps(marker), value)


def _set(target: Callable[[dict[str, Any]], dict[str, Any]], key: str, value: object) -> Any:
    def change(line: dict[str, Any]) -> None:
        target(line)[key] = value

    return change


def _infinite(target: Callable[[dict[str, Any]], dict[str, Any]], key: str) -> Any:
    """Set ``key`` to ``1e999``: JSON that reads as an infinite float."""

    def change(line: dict[str, Any]) -> str:
        found = target(line)
        found[key] = {"x": "INF"} if key == "metadata" else "INF"
        return _raw(line, "INF", "1e999")

    return change


def _nested(depth: int) -> Any:
    return json.loads("[" * depth + "]" * depth)


_CONTEXT = {"key": "topic:t1", "eval_count": 1, "eval_sum": 0.5, "updated_at": None}


# (case, the change, words of the error): the 0.2.0 reader let each through.
CASES: list[tuple[str, Callable[[dict[str, Any]], str | None], str]] = [
    ("a lone surrogate in metadata", _set(_record, "metadata", {"x": "\ud800"}), "surrogate"),
    ("a lone surrogate in a label", _set(_record, "labels", {"t": ["\udfff"]}), "surrogate"),
    ("1e999 in metadata", _infinite(_record, "metadata"), "JSON"),
    ("1e999 in an evaluation sum", _infinite(_evidence, "eval_sum"), "eval_sum"),
    ("NUL in a text", _set(_record, "text", "tea\x00 at noon"), "NUL"),
    (
        "a repeated evidence context",
        lambda line: _evidence(line).update(
            contexts=[{**_CONTEXT, "updated_at": line["record"]["created_at"]}] * 2
        ),
        "twice",
    ),
    ("a 10 MB text", _set(_record, "text", "tea " * 2_500_000), "over the limit"),
    ("an empty text", _set(_record, "text", ""), "empty"),
    ("a 1 MB id", lambda line: _record(line).update(id="x" * 1_000_000), "id="),
    ("an id with NUL", lambda line: _record(line).update(id="a\x00b"), "id="),
    ("an id with a newline", lambda line: _record(line).update(id="a\nb"), "control character"),
    ("10 MB of metadata", _set(_record, "metadata", {"x": "m" * 10_000_000}), "over the limit"),
    (
        "45-deep metadata",
        _set(_record, "metadata", {"x": json.loads("[" * 45 + "]" * 45)}),
        "deeper",
    ),
    (
        "100,000 labels",
        _set(_record, "labels", {"t": [f"v{n}" for n in range(100_000)]}),
        "label values",
    ),
    ("a manual value of 5.0", _set(_evidence, "manual", 5.0), "manual"),
    (
        "updated_at before created_at",
        lambda line: _record(line).update(updated_at="2001-01-01T00:00:00.000Z"),
        "before it was created",
    ),
    ("revision 2**63 - 1", _set(_record, "revision", 2**63 - 1), "revision"),
    (
        "a vector space that is a list",  # found by the fuzz below: unhashable, a TypeError
        lambda line: line["vectors"][0].update(space_id=[line["vectors"][0]["space_id"]]),
        "is not in the header's spaces",
    ),
]


class _Target:
    """A store to restore into, holding memories of its own, and what it holds."""

    def __init__(self, store: Any, drop: Callable[[], None] | None = None) -> None:
        self.store = store
        self._drop = drop
        memory = Memory(store, HashEmbedder(32))  # not closed: that closes the store
        for n in range(5):
            memory.remember(f"the target's own memory {n}", scope=("target",))
        self.before = self.snapshot()

    def snapshot(self) -> str:
        out = io.StringIO()
        backup(self.store, out, now=datetime(2030, 1, 1, tzinfo=UTC))
        return out.getvalue()

    def close(self) -> None:
        if hasattr(self.store, "close"):
            self.store.close()
        if self._drop is not None:
            self._drop()


def _targets(tmp_path: Path, pg_admin: str | None) -> list[Callable[[], _Target]]:
    """Makers of fresh targets: InMemoryStore, a SQLite file, a PostgreSQL database."""
    count = iter(range(1_000_000))
    makers: list[Callable[[], _Target]] = [
        lambda: _Target(InMemoryStore()),
        lambda: _Target(SqliteStore(tmp_path / f"target-{next(count)}.db")),
    ]
    if pg_admin is not None:
        import pg_server

        from engramdb.postgres import PostgresStore

        def postgres() -> _Target:
            name = f"engramdb_refusals_{os.getpid()}_{next(count)}"
            store = PostgresStore(pg_server.create_database(pg_admin, name))
            return _Target(store, lambda: pg_server.drop_database(pg_admin, name))

        makers.append(postgres)
    return makers


def _refused_with_nothing_written(target: _Target, text: str, words: str, line: int) -> None:
    try:
        with pytest.raises(ValidationError) as refused:
            restore(target.store, text.split("\n"), source="b.jsonl", trust_vectors=True)
        message = str(refused.value)
        assert message.startswith(f"b.jsonl line {line}: ") and words in message, message
        assert message.endswith("; nothing was restored"), message
        assert target.snapshot() == target.before
    finally:
        target.close()


@pytest.mark.parametrize(("case", "change", "words"), CASES, ids=[c[0] for c in CASES])
def test_a_restore_refuses_a_value_no_write_accepts_and_writes_nothing(
    good: str,
    tmp_path: Path,
    pg_admin: str,
    case: str,
    change: Callable[[dict[str, Any]], str | None],
    words: str,
) -> None:
    """The bad value at item 450 of 500: one error naming line 451, nothing written on
    any store (0.2.0 wrote 400 memories, then failed with a traceback, or stored it)."""
    _header, items, _end = split_backup(good)
    position = BAD_AT
    if "evidence" in case or "manual" in case or "context" in case:  # an item with some
        position = next(
            n for n in range(BAD_AT, ITEMS) if json.loads(items[n])["utility"] is not None
        )
    text = _with(good, position, change)
    for make in _targets(tmp_path, pg_admin):
        _refused_with_nothing_written(make(), text, words, position + 2)


def test_a_scope_part_with_a_slash_restores_as_the_api_stores_it(good: str) -> None:
    """``remember`` takes a scope part holding ``/`` (the CLI reads ``a/b`` as two
    parts; the library does not split), so a backup of such a memory restores."""
    with Memory(InMemoryStore(), HashEmbedder(32)) as memory:
        memory.remember("a note", scope=("team/red",))
        out = io.StringIO()
        backup(memory.store, out)
    target = InMemoryStore()
    assert restore(target, out.getvalue().split("\n")).restored == 1


def test_a_backup_cut_short_or_changed_is_refused_and_writes_nothing(good: str) -> None:
    """A file cut at a line boundary (0.2.0 restored it silently, with fewer memories),
    a changed line that still reads as a backup line, and a line after the end marker
    are each refused whole."""
    header, items, end = split_backup(good)
    cut = "\n".join([header, *items[:300]]) + "\n"
    changed = good.replace('"n":7,', '"n":8,', 1)
    assert changed != good
    extra = good + items[0] + "\n"
    for text, words in [
        (cut, "without its end marker: the file was cut short (it holds 300 memories)"),
        (
            "\n".join([header, *items[:-1], end]) + "\n",
            "counts 500 memories but the file has 499",
        ),
        (changed, "SHA-256 differs"),
        (extra, "follows the end marker"),
    ]:
        target = InMemoryStore()
        with pytest.raises(ValidationError, match="nothing was restored") as refused:
            restore(target, text.split("\n"), trust_vectors=True)
        assert words in str(refused.value)
        assert target.batch([_stats()])[0].items == 0


def _stats() -> Any:
    from engramdb.store import Stats

    return Stats("", datetime.now(UTC) + timedelta(days=1))


# -- the fuzz -------------------------------------------------------------------------------

_HOSTILE = st.one_of(
    st.sampled_from(
        [
            None,
            "",
            "\x00",
            "\ud800",
            "a\nb",
            -1,
            0,
            2**63,
            -(2**70),
            1.5,
            True,
            [],
            {},
            [None],
            {"": None},
            "x" * 40_000,
            "2001-01-01T00:00:00.000Z",
            "9999-12-31T23:59:59.999Z",
            "not a time",
        ]
    ),
    st.text(max_size=5),
    st.integers(),
    st.floats(),
    st.integers(30, 80).map(_nested),
)


def _paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _paths(inner, (*path, key))
    elif isinstance(value, list):
        for position, inner in enumerate(value):
            yield from _paths(inner, (*path, position))


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, *rest = path
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[head] = _replaced(value[head], tuple(rest), new)
    return copy


@pytest.mark.slow
def test_a_fuzzed_backup_line_is_restored_or_refused_with_nothing_written(
    good: str, tmp_path: Path, pg_admin: str, long_factor: int
) -> None:
    """One value anywhere in one item line (a key's value, a list element, the line
    itself) replaced by a hostile one, the end marker rewritten so the line's own checks
    decide: on every store, the restore succeeds, or raises an ``EngramError`` and the
    target holds exactly what it held."""
    header, items, _ = split_backup(good)
    small = backup_text(header, items[:40])
    targets = _targets(tmp_path, pg_admin)

    @settings(
        max_examples=60 * long_factor,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(st.integers(0, 39), st.data(), _HOSTILE)
    def run(position: int, data: st.DataObject, hostile: Any) -> None:
        line = json.loads(split_backup(small)[1][position])
        path = data.draw(st.sampled_from(list(_paths(line))), label="path")
        changed = _replaced(line, path, hostile)
        try:
            raw = json.dumps(changed, separators=(",", ":"))
        except (TypeError, ValueError):
            return
        text = backup_text(header, [*split_backup(small)[1][:position], raw,
                                    *split_backup(small)[1][position + 1 :]])  # fmt: skip
        for make in targets:
            target = make()
            try:
                restore(target.store, text.split("\n"), trust_vectors=True)
            except EngramError:
                assert target.snapshot() == target.before
            finally:
                target.close()

    run()


def _import(db: str, path: Path) -> tuple[int, str]:
    """``engramdb --db DB --scope import-target import PATH`` in this process, with the
    hash embedder: its exit status and standard error."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAMDB_")}
    err = io.StringIO()
    with (
        mock.patch.dict(os.environ, {**clean, "ENGRAMDB_EMBEDDER": "hash:64"}, clear=True),
        redirect_stderr(err),
        redirect_stdout(io.StringIO()),
    ):
        status = cli_main(["--db", db, "--scope", "import-target", "import", str(path)])
    return status, err.getvalue()


@pytest.mark.slow
def test_a_fuzzed_import_line_is_imported_or_refused_with_nothing_written(
    tmp_path: Path, pg_admin: str, long_factor: int
) -> None:
    """An export file (with vectors) with one value of one line replaced by a hostile
    one, imported with ``engramdb import`` into a SQLite file and into PostgreSQL that
    hold memories of their own: imported (exit 0), or refused in one line of error
    (exit 1) with the database byte for byte as it was; never a traceback."""
    import pg_server

    source = tmp_path / "source.db"
    with Memory(SqliteStore(source), HashEmbedder(64)) as memory:
        for n in range(6):
            memory.remember(f"exported note {n} about tea", scope=("import-target",))
    export = tmp_path / "export.jsonl"
    assert _run_cli(["--db", str(source), "--scope", "import-target", "export",
                     "--with-vectors", "-o", str(export)]) == 0  # fmt: skip
    lines = export.read_text().splitlines()
    name = f"engramdb_import_fuzz_{os.getpid()}"
    databases = {
        "sqlite": lambda n: str(tmp_path / f"import-{n}.db"),
        "postgres": lambda n: pg_server.create_database(pg_admin, f"{name}_{n}"),
    }
    count = iter(range(1_000_000))

    @settings(
        max_examples=25 * long_factor,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(st.integers(0, len(lines) - 1), st.data(), _HOSTILE)
    def run(position: int, data: st.DataObject, hostile: Any) -> None:
        line = json.loads(lines[position])
        path = data.draw(st.sampled_from(list(_paths(line))), label="path")
        try:
            raw = json.dumps(_replaced(line, path, hostile))
        except (TypeError, ValueError):
            return
        file = tmp_path / f"fuzzed-{next(count)}.jsonl"
        file.write_text("\n".join([*lines[:position], raw, *lines[position + 1 :]]) + "\n")
        for kind, make in databases.items():
            number = next(count)
            db = make(number)
            assert is_postgres(db) == (kind == "postgres"), db
            _seed(db)
            before = _backup_text(db)
            status, err = _import(db, file)
            assert status in (0, 1), (kind, status, err)
            if status == 1:
                assert err.count("\n") == 1 and err.startswith("engramdb: error: "), err
                assert _backup_text(db) == before, kind
            if kind == "postgres":
                pg_server.drop_database(pg_admin, f"{name}_{number}")

    run()


def _run_cli(argv: list[str]) -> int:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAMDB_")}
    with (
        mock.patch.dict(os.environ, {**clean, "ENGRAMDB_EMBEDDER": "hash:64"}, clear=True),
        redirect_stdout(io.StringIO()),
        redirect_stderr(io.StringIO()),
    ):
        return cli_main(argv)


def _seed(db: str) -> None:
    """The target's own memories, in another scope and in the import's."""
    _run_cli(["--db", db, "--scope", "import-target", "add", "the target's own note"])
    _run_cli(["--db", db, "--scope", "elsewhere", "add", "a note of another scope"])


def _backup_text(db: str) -> str:
    """The database as a backup at a fixed time (the file's bytes of every memory)."""
    out = tmp = Path(tempfile.mkdtemp()) / "b.jsonl"
    assert _run_cli(["--db", db, "backup", str(out)]) == 0
    text = tmp.read_text()
    shutil.rmtree(tmp.parent)
    return text
