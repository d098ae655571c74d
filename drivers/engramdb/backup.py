"""Full backups of a store, and their restore: every live item exactly as it is.

:func:`backup` writes JSON Lines (``docs/storage-format.md#backups``): a header line

    {"format": 1, "kind": "engramdb-backup", "spaces": ["hash/bow@64", ...]}

naming every embedding space of the store, then one line per live item, scopes in scope
order and each scope's items as ``ListItems`` gives them (newest first)::

    {"record": {...}, "history": [{...}, ...], "utility": {...} | null,
     "vectors": [{"space_id": ..., "vector": "<base64>", "embedded_at": ...}, ...]}

``record`` and each earlier revision of ``history`` (newest first) are
:func:`engramdb.json_format.record_to_json`'s objects; ``utility`` is the item's policy
evidence (``GetUtility``), ``vectors`` its vector in each space (the base64 of the stored
float32 bytes, spaces in id order). Every line is written by
:func:`~engramdb.json_format.dumps_line` and the file is split on ``\\n`` only, so any
text survives. The file depends only on the data: backing up a restored store gives the
same bytes.

:func:`restore` reads a whole backup and checks every line (a hostile or broken line
is a :class:`ValidationError` naming it) and every id against the target before it
writes anything: with ``on_conflict="refuse"`` (the default) a target that holds any
of the ids (a live item) refuses the restore with ONE :class:`ConflictError` naming the
first few; ``"skip"`` leaves those items as the target has them, ``"replace"`` deletes
them and restores the backup's. It then writes ``batch_size`` items per atomic batch
(``RestoreItem`` and ``PutVector``): a restore that fails partway (the disk fills, the
server goes) keeps the batches before, and running it again with ``on_conflict="skip"``
finishes it.

Both work on any sync store: the reads and writes are store ops (``ListScopes``,
``ListItems``, ``History``, ``GetUtility``, ``GetVectors``; ``RestoreItem``,
``PutVector``), so SQLite, PostgreSQL and your own store back up and restore alike. A
target without ``supports_policy`` keeps no evidence: the restore leaves it out and
counts it in ``RestoreReport.evidence_dropped``. Receipts of recalls not yet evaluated
are short-lived and are not backed up.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from engramdb import (
    ConflictError,
    ContextUtility,
    EmbeddingSpace,
    EngramError,
    MemoryRecord,
    Scope,
    Utility,
    ValidationError,
)
from engramdb.json_format import (
    dumps_line,
    format_time,
    loads_line,
    parse_time,
    record_from_json,
    record_to_json,
)
from engramdb.store import (
    DeleteItem,
    GetItems,
    GetUtility,
    GetVectors,
    History,
    ListItems,
    ListScopes,
    Op,
    PutVector,
    RegisterSpace,
    RestoreItem,
    ScopeSet,
    Stats,
    StoreCapabilities,
    check_restore,
    check_unit_vector,
)
from engramdb.validate import shown

__all__ = [
    "FORMAT",
    "KIND",
    "Backup",
    "BackupItem",
    "BackupReport",
    "RestoreReport",
    "backup",
    "read_backup",
    "restore",
    "utility_from_json",
    "utility_to_json",
]

FORMAT = 1
"""The version of the backup format, in its header line."""

KIND = "engramdb-backup"
"""The header's ``kind``: what tells a backup from an export."""

OnConflict = Literal["refuse", "skip", "replace"]

_HISTORY = 1_000_000  # every earlier revision a store keeps
_LINE_KEYS = ("record", "history", "utility", "vectors")
_SHOWN_IDS = 5
_UTILITY_KEYS = (
    "exposures",
    "last_exposed_at",
    "eval_count",
    "eval_sum",
    "manual",
    "manual_updated_at",
    "reinforced_at",
    "contexts",
)


class _Writer(Protocol):
    def write(self, text: str, /) -> Any: ...


@dataclass(frozen=True, slots=True)
class BackupReport:
    scopes: int  # scopes written
    items: int  # live items (lines after the header)
    revisions: int  # earlier revisions, over all items
    evidence: int  # items with policy evidence
    vectors: int  # vectors, over all items and spaces


@dataclass(frozen=True, slots=True)
class RestoreReport:
    restored: int  # items written (replaced ones included)
    skipped: int  # items the target held and kept (on_conflict="skip")
    replaced: int  # items the target held and lost to the backup's (on_conflict="replace")
    vectors: int  # vectors sent (a vector the target holds already is kept)
    spaces: int  # spaces registered
    evidence_dropped: int = 0  # items whose evidence a store without policy left out


@dataclass(frozen=True, slots=True)
class BackupItem:
    """One item line: the record, its earlier revisions (newest first), its evidence
    and its vectors."""

    record: MemoryRecord
    history: tuple[MemoryRecord, ...]
    utility: Utility | None
    vectors: tuple[tuple[str, bytes, datetime], ...]  # (space id, bytes, embedded_at)


@dataclass
class Backup:
    """A backup read and checked by :func:`read_backup`: its spaces and its items."""

    spaces: list[EmbeddingSpace] = field(default_factory=list)
    items: list[BackupItem] = field(default_factory=list)


# -- the evidence as JSON ------------------------------------------------------------------


def utility_to_json(utility: Utility) -> dict[str, Any]:
    """An item's evidence as a JSON object (times as RFC 3339, contexts in order)."""
    return {
        "exposures": utility.exposures,
        "last_exposed_at": format_time(utility.last_exposed_at),
        "eval_count": utility.eval_count,
        "eval_sum": utility.eval_sum,
        "manual": utility.manual,
        "manual_updated_at": format_time(utility.manual_updated_at),
        "reinforced_at": format_time(utility.reinforced_at),
        "contexts": [
            {
                "key": c.key,
                "eval_count": c.eval_count,
                "eval_sum": c.eval_sum,
                "updated_at": format_time(c.updated_at),
            }
            for c in utility.contexts
        ],
    }


def _fields(obj: object, names: Sequence[str], what: str) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping) or sorted(obj) != sorted(names):
        raise ValidationError(f"{what} must be an object with exactly {', '.join(names)}")
    return obj


def _count(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValidationError(f"{what} is {shown(value)}; it must be a whole number from 0 up")
    return value


def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(f"{what} is {shown(value)}; it must be a number")
    return float(value)


def _moment(value: object, what: str) -> datetime | None:
    return None if value is None else parse_time(value, what)


def utility_from_json(obj: object) -> Utility:
    """The evidence :func:`utility_to_json` wrote, checked field by field."""
    u = _fields(obj, _UTILITY_KEYS, "the utility")
    if not isinstance(u["contexts"], list):
        raise ValidationError("the utility's contexts must be a list")
    contexts = []
    for c in u["contexts"]:
        c = _fields(c, ("key", "eval_count", "eval_sum", "updated_at"), "a context")
        if not isinstance(c["key"], str):
            raise ValidationError(f"a context's key is {shown(c['key'])}; it must be a string")
        contexts.append(
            ContextUtility(
                c["key"],
                _count(c["eval_count"], "a context's eval_count"),
                _number(c["eval_sum"], "a context's eval_sum"),
                parse_time(c["updated_at"], "a context's updated_at"),
            )
        )
    manual = u["manual"]
    return Utility(
        exposures=_count(u["exposures"], "exposures"),
        last_exposed_at=_moment(u["last_exposed_at"], "last_exposed_at"),
        eval_count=_count(u["eval_count"], "eval_count"),
        eval_sum=_number(u["eval_sum"], "eval_sum"),
        manual=None if manual is None else _number(manual, "manual"),
        manual_updated_at=_moment(u["manual_updated_at"], "manual_updated_at"),
        reinforced_at=_moment(u["reinforced_at"], "reinforced_at"),
        contexts=tuple(contexts),
    )


# -- backup ------------------------------------------------------------------------------


def _capabilities(store: Any) -> StoreCapabilities:
    found = getattr(store, "capabilities", None)
    return found if isinstance(found, StoreCapabilities) else StoreCapabilities()


def backup(
    store: Any,
    out: _Writer,
    prefix: Scope = (),
    *,
    now: datetime | None = None,
    page_size: int = 500,
) -> BackupReport:
    """Write a backup of ``store``'s live items in the scopes under ``prefix`` (``()``:
    every scope) to ``out`` (anything with ``write(str)``); see the module docstring.

    Each page of ``page_size`` items is read in one batch with its history, evidence and
    vectors; take the backup while nothing writes to the scopes for a consistent copy
    of them all.
    """
    now = now or datetime.now(UTC)
    capabilities = _capabilities(store)
    (stats,) = store.batch([Stats("", now)])
    spaces = sorted(stats.spaces)
    out.write(dumps_line({"format": FORMAT, "kind": KIND, "spaces": spaces}) + "\n")
    scopes = items = revisions = evidence = vectors = 0
    for scope in _scopes(store, prefix, now):
        scopes += 1
        before: str | None = None
        while True:
            (records,) = store.batch([ListItems(ScopeSet.of(scope), page_size, now, before)])
            if not records:
                break
            before = records[-1].id
            reads: list[Op] = []
            if capabilities.supports_history:
                reads += [History(r.id, _HISTORY, now) for r in records]
            if capabilities.supports_policy:
                reads.append(GetUtility(tuple(r.id for r in records)))
            hashes = tuple(dict.fromkeys(r.content_sha256 for r in records))
            reads += [GetVectors(space, hashes) for space in spaces]
            answers = iter(store.batch(reads) if reads else [])
            histories = [next(answers) for _ in records] if capabilities.supports_history else []
            utilities = next(answers) if capabilities.supports_policy else {}
            stored = [next(answers) for _ in spaces]
            for position, record in enumerate(records):
                history = histories[position] if histories else []
                utility = utilities.get(record.id)
                held = [
                    (space, found[record.content_sha256])
                    for space, found in zip(spaces, stored, strict=True)
                    if record.content_sha256 in found
                ]
                line = {
                    "record": record_to_json(record),
                    "history": [record_to_json(earlier) for earlier in history],
                    "utility": None if utility is None else utility_to_json(utility),
                    "vectors": [
                        {
                            "space_id": space,
                            "vector": base64.b64encode(raw).decode("ascii"),
                            "embedded_at": format_time(at),
                        }
                        for space, (raw, at) in held
                    ],
                }
                out.write(dumps_line(line) + "\n")
                items += 1
                revisions += len(history)
                evidence += utility is not None
                vectors += len(held)
            if len(records) < page_size:
                break
    return BackupReport(scopes, items, revisions, evidence, vectors)


def _scopes(store: Any, prefix: Scope, now: datetime) -> Iterator[Scope]:
    after: Scope | None = None
    while True:
        (page,) = store.batch([ListScopes(prefix, 100, now, after)])
        yield from (entry.scope for entry in page)
        if len(page) < 100:
            return
        after = page[-1].scope


# -- restore -------------------------------------------------------------------------------


def read_backup(lines: Iterable[str], source: str = "backup") -> Backup:
    """Every line of a backup, checked (nothing is written): a bad line raises
    :class:`ValidationError` as ``"<source> line N: <problem>; nothing was restored"``.
    ``lines`` is the file's text split on ``\\n`` (a ``\\r`` ending a line is dropped),
    or a file object opened with ``newline=""``."""
    result = Backup()
    spaces: dict[str, int] = {}
    ids: set[str] = set()
    header = False
    for number, line in enumerate(lines, 1):
        line = line.removesuffix("\n").removesuffix("\r")
        if not line.strip():
            continue
        try:
            value = loads_line(line)
            if not header:
                result.spaces = _header(value)
                spaces = {space.id: space.dimensions for space in result.spaces}
                header = True
                continue
            item = _item(value, spaces)
            if item.record.id in ids:
                raise ValidationError(f"id {item.record.id!r} is on an earlier line too")
            ids.add(item.record.id)
            result.items.append(item)
        except EngramError as exc:
            raise ValidationError(f"{source} line {number}: {exc}; nothing was restored") from None
    if not header:
        raise ValidationError(f"{source} is empty: it has no header line; nothing was restored")
    return result


def _header(value: object) -> list[EmbeddingSpace]:
    if not isinstance(value, Mapping) or value.get("kind") != KIND:
        raise ValidationError(
            f'the first line is not a backup header ({{"kind": "{KIND}", ...}}); an export is '
            "read back with `engramdb import`"
        )
    version = value.get("format")
    if isinstance(version, bool) or version != FORMAT:
        newer = type(version) is int and version > FORMAT
        upgrade = "; it was written by a newer engramdb: upgrade engramdb to restore it"
        raise ValidationError(
            f"backup format {shown(version)} is not {FORMAT}" + (upgrade if newer else "")
        )
    _fields(value, ("format", "kind", "spaces"), "the header")
    listed = value["spaces"]
    if not isinstance(listed, list) or not all(isinstance(s, str) for s in listed):
        raise ValidationError("the header's spaces must be a list of space ids")
    return [EmbeddingSpace.from_id(space_id) for space_id in listed]


def _item(value: object, spaces: Mapping[str, int]) -> BackupItem:
    line = _fields(value, _LINE_KEYS, "an item line")
    record = record_from_json(line["record"])
    if not isinstance(line["history"], list):
        raise ValidationError("the history must be a list of records, newest first")
    history = tuple(record_from_json(earlier) for earlier in line["history"])
    check_restore(None, RestoreItem(record, record.created_at, history))
    utility = None if line["utility"] is None else utility_from_json(line["utility"])
    if not isinstance(line["vectors"], list):
        raise ValidationError("the vectors must be a list")
    vectors = []
    for entry in line["vectors"]:
        entry = _fields(entry, ("space_id", "vector", "embedded_at"), "a vector")
        space = entry["space_id"]
        if space not in spaces:
            raise ValidationError(f"vector space {shown(space)} is not in the header's spaces")
        if not isinstance(entry["vector"], str):
            raise ValidationError("a vector must be base64 text")
        try:
            raw = base64.b64decode(entry["vector"], validate=True)
        except (binascii.Error, ValueError):
            raise ValidationError("a vector is not base64 text") from None
        check_unit_vector(raw, spaces[space])
        vectors.append((space, raw, parse_time(entry["embedded_at"], "a vector's embedded_at")))
    return BackupItem(record, history, utility, tuple(vectors))


def restore(
    store: Any,
    lines: Iterable[str] | Backup,
    on_conflict: OnConflict = "refuse",
    *,
    now: datetime | None = None,
    batch_size: int = 200,
    source: str = "backup",
) -> RestoreReport:
    """Restore a backup's lines (or the :class:`Backup` :func:`read_backup` read) into
    ``store`` (a sync store); see the module docstring.

    Every line is read and checked, and every id looked up in ``store``, before the
    first write: a bad line raises :class:`ValidationError` naming it, and with
    ``on_conflict="refuse"`` an id the target holds raises :class:`ConflictError`;
    either way nothing is written. ``source`` names the backup in those errors.
    """
    if on_conflict not in ("refuse", "skip", "replace"):
        raise ValidationError(
            f"on_conflict={shown(on_conflict)} is not one of 'refuse', 'skip', 'replace'"
        )
    now = now or datetime.now(UTC)
    data = lines if isinstance(lines, Backup) else read_backup(lines, source)
    held = _held(store, [item.record.id for item in data.items], now)
    if held and on_conflict == "refuse":
        first = ", ".join(repr(i) for i in held[:_SHOWN_IDS])
        more = f" and {len(held) - _SHOWN_IDS} more" if len(held) > _SHOWN_IDS else ""
        raise ConflictError(
            f"the target already holds {len(held)} of the {len(data.items)} memories of "
            f"{source} (ids {first}{more}); nothing was restored: restore with "
            "--on-conflict skip to keep the target's, or --on-conflict replace to overwrite "
            "them with the backup's (on_conflict= in Python)"
        )
    policy = _capabilities(store).supports_policy
    if data.spaces:
        store.batch([RegisterSpace(space, now) for space in data.spaces])
    conflicting = set(held)
    restored = skipped = replaced = vectors = dropped = 0
    for start in range(0, len(data.items), max(1, batch_size)):
        ops: list[Op] = []
        puts: list[Op] = []
        for item in data.items[start : start + max(1, batch_size)]:
            item_id = item.record.id
            if item_id in conflicting:
                if on_conflict == "skip":
                    skipped += 1
                    continue
                ops.insert(0, DeleteItem(item_id))
                replaced += 1
            utility = item.utility if policy else None
            dropped += item.utility is not None and not policy
            ops.append(RestoreItem(item.record, now, item.history, utility))
            puts += [
                PutVector(space, item.record.content_sha256, raw, at)
                for space, raw, at in item.vectors
            ]
        if ops:
            store.batch([*ops, *puts])
        restored += sum(isinstance(op, RestoreItem) for op in ops)
        vectors += len(puts)
    return RestoreReport(restored, skipped, replaced, vectors, len(data.spaces), dropped)


def _held(store: Any, ids: Sequence[str], now: datetime) -> list[str]:
    """The ids of ``ids`` that are live items of ``store``, in the order given."""
    held: list[str] = []
    for start in range(0, len(ids), 500):
        chunk = tuple(ids[start : start + 500])
        (found,) = store.batch([GetItems(chunk, now)])
        held += [item_id for item_id, item in zip(chunk, found, strict=True) if item is not None]
    return held
