"""Full backups of a store, and their restore: every live item exactly as it is.

:func:`backup` writes JSON Lines (``docs/storage-format.md#backups``): a header line

    {"format": 2, "kind": "engramdb-backup", "spaces": ["hash/bow@64", ...]}

naming every embedding space of the store, then one line per live item, scopes in scope
order and each scope's items as ``ListItems`` gives them (newest first)::

    {"record": {...}, "history": [{...}, ...], "utility": {...} | null,
     "vectors": [{"space_id": ..., "vector": "<base64>", "embedded_at": ...}, ...]}

and last an end marker::

    {"kind": "engramdb-backup-end", "items": 1234, "unreadable": [], "sha256": "<hex>"}

``record`` and each earlier revision of ``history`` (newest first) are
:func:`engramdb.json_format.record_to_json`'s objects; ``utility`` is the item's policy
evidence (``GetUtility``), ``vectors`` its vector in each space (the base64 of the stored
float32 bytes, spaces in id order). The end marker counts the item lines, names the
memories whose stored row could not be read (left out, and reported), and holds the
SHA-256 of every line before it (each line's UTF-8 and a ``\\n``), so a file cut short
or changed is refused. Every line is written by :func:`~engramdb.json_format.dumps_line`
and the file is split on ``\\n`` only, so any text survives. The file depends only on
the data: backing up a restored store gives the same bytes.

**Online.** A backup may be taken while others write. Each page of items is read in one
store batch (one snapshot: a SQLite read transaction, PostgreSQL's REPEATABLE READ): the
records as they are in it, with their histories, evidence and vectors, so every line is
one item as it was at one moment, and a restore of any backup succeeds. Items written
after a page was read are in the next backup.

:func:`restore` reads a whole backup and checks every line (:func:`read_backup`: the
shape, then every record, earlier revision and evidence against the checks a write
makes, ``engramdb.validate.Validator``) and every id against the target before it
writes anything: with ``on_conflict="refuse"`` (the default) a target that holds any
of the ids (a live item) refuses the restore with ONE :class:`ConflictError` naming the
first few; ``"skip"`` leaves those items as the target has them, ``"replace"`` deletes
them and restores the backup's. An id the target holds in another scope than the
backup's is a conflict whatever ``on_conflict`` says: it is never deleted. Then it
writes everything in ONE atomic batch (``RestoreItem`` and ``PutVector``): all or
nothing. ``batch_size=N`` writes N items per batch instead, for a backup too large for
one transaction: a restore that fails partway then keeps the batches before, and running
it again with ``on_conflict="skip"`` finishes it.

**Vectors are trusted only where they were made.** A vector from a file could be
anything, and a store shares one vector per text among its scopes, so a restore stores
a backup's vectors only when it can tell they belong to their texts: with ``embedder``,
the vectors of its space are checked by embedding their texts again (a vector whose
cosine to the text's is below :data:`~engramdb.vector_check.TOLERANCE` refuses the whole
file; the fresh vector is the one stored, with the file's bytes and time only where
they are the same) and the other spaces' are left out; without it every vector is left
out; ``trust_vectors=True`` stores them as they are, for a backup you made yourself.
Items whose vector was left out are pending: maintenance or ``reindex`` embeds them.

Both work on any sync store: the reads and writes are store ops (``ListScopes``,
``ListItems``, ``GetItems``, ``History``, ``GetUtility``, ``GetVectors``,
``UnreadableItems``; ``RestoreItem``, ``PutVector``), so SQLite, PostgreSQL and your own
store back up and restore alike. A target without ``supports_policy`` keeps no
evidence: the restore leaves it out and counts it in ``RestoreReport.evidence_dropped``.
Receipts of recalls not yet evaluated are short-lived and are not backed up.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from engramdb import (
    ConflictError,
    ContextUtility,
    Embedder,
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
    UnreadableItems,
    check_restore,
    check_unit_vector,
)
from engramdb.validate import Limits, Validator, shown
from engramdb.vector_check import TOLERANCE, cosines

__all__ = [
    "END_KIND",
    "FORMAT",
    "KIND",
    "Backup",
    "BackupItem",
    "BackupReport",
    "RestoreReport",
    "backup",
    "backup_records",
    "read_backup",
    "restore",
    "utility_from_json",
    "utility_to_json",
]

FORMAT = 2
"""The version of the backup format, in its header line (1: engramdb 0.2.0's, without
an end marker; still read)."""

KIND = "engramdb-backup"
"""The header's ``kind``: what tells a backup from an export."""

END_KIND = "engramdb-backup-end"
"""The end marker's ``kind``."""

OnConflict = Literal["refuse", "skip", "replace"]

_HISTORY = 1_000_000  # every earlier revision a store keeps
_LINE_KEYS = ("record", "history", "utility", "vectors")
_END_KEYS = ("kind", "items", "unreadable", "sha256")
_SHOWN_IDS = 5
_UNREADABLE = 1_000  # ids of unreadable rows named per scope
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
    items: int  # live items (lines between the header and the end marker)
    revisions: int  # earlier revisions, over all items
    evidence: int  # items with policy evidence
    vectors: int  # vectors, over all items and spaces
    unreadable: tuple[str, ...] = ()  # ids of live items whose row did not decode: left out


@dataclass(frozen=True, slots=True)
class RestoreReport:
    restored: int  # items written (replaced ones included)
    skipped: int  # items the target held and kept (on_conflict="skip")
    replaced: int  # items the target held and lost to the backup's (on_conflict="replace")
    vectors: int  # vectors sent (a vector the target holds already is kept)
    spaces: int  # spaces registered
    evidence_dropped: int = 0  # items whose evidence a store without policy left out
    vectors_checked: int = 0  # vectors checked against their texts embedded again
    vectors_left_out: int = 0  # vectors not stored (unchecked): their items are pending
    unreadable: tuple[str, ...] = ()  # memories the backup itself could not read (its end)
    ended: bool = True  # the file had an end marker (a format-1 backup has none)


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
    """A backup read and checked by :func:`read_backup`: its spaces, its items, the ids
    its end marker names as unreadable, and whether it had one (format 1: no)."""

    spaces: list[EmbeddingSpace] = field(default_factory=list)
    items: list[BackupItem] = field(default_factory=list)
    unreadable: tuple[str, ...] = ()
    ended: bool = True
    lines: list[int] = field(default_factory=list)  # the line number of each item


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
    try:
        return float(value)
    except OverflowError:
        raise ValidationError(f"{what} is {shown(value)}, too large for a number") from None


def _moment(value: object, what: str) -> datetime | None:
    return None if value is None else parse_time(value, what)


def utility_from_json(obj: object) -> Utility:
    """The evidence :func:`utility_to_json` wrote, checked field by field (its values
    against what the policy writes: ``Validator.evidence``)."""
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
    return Validator.evidence(
        Utility(
            exposures=_count(u["exposures"], "exposures"),
            last_exposed_at=_moment(u["last_exposed_at"], "last_exposed_at"),
            eval_count=_count(u["eval_count"], "eval_count"),
            eval_sum=_number(u["eval_sum"], "eval_sum"),
            manual=None if manual is None else _number(manual, "manual"),
            manual_updated_at=_moment(u["manual_updated_at"], "manual_updated_at"),
            reinforced_at=_moment(u["reinforced_at"], "reinforced_at"),
            contexts=tuple(contexts),
        )
    )


# -- backup ------------------------------------------------------------------------------


def _capabilities(store: Any) -> StoreCapabilities:
    found = getattr(store, "capabilities", None)
    return found if isinstance(found, StoreCapabilities) else StoreCapabilities()


class _Lines:
    """Writes lines to ``out`` and keeps the SHA-256 of what it wrote."""

    def __init__(self, out: _Writer) -> None:
        self.out = out
        self.sha256 = hashlib.sha256()

    def write(self, value: object) -> None:
        line = dumps_line(value) + "\n"
        self.sha256.update(line.encode("utf-8", "surrogatepass"))
        self.out.write(line)


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

    Writers may run meanwhile: each page of ``page_size`` items is read in one batch
    with its history, evidence and vectors. A live item whose stored row does not
    decode cannot be backed up: its id is in the report's ``unreadable`` (and the end
    marker's); ``engramdb doctor`` finds it too.
    """
    now = now or datetime.now(UTC)
    written = _Written(store, out, now)
    for scope in _scopes(store, prefix, now):
        written.scopes += 1
        selection = ScopeSet.of(scope)
        before: str | None = None
        while True:  # to an empty page: a page may be short of rows that do not decode
            (listed,) = store.batch([ListItems(selection, page_size, now, before)])
            if not listed:
                break
            before = listed[-1].id
            written.page(listed)
        (bad,) = store.batch([UnreadableItems(selection, now, _UNREADABLE)])
        written.unreadable += bad
    return written.end()


def backup_records(
    store: Any, records: Sequence[MemoryRecord], out: _Writer, *, now: datetime | None = None
) -> BackupReport:
    """Write a backup of the items ``records`` name to ``out``: each read again, in one
    batch, as it is now, with its history, evidence and vectors (one gone since is left
    out). A complete backup file, which :func:`restore` reads as any other: what a
    tenant's Durable Object sends another when memories move between them."""
    written = _Written(store, out, now or datetime.now(UTC))
    written.page(records)
    return written.end()


class _Written:
    """A backup being written: its header first, then pages of items, then the end."""

    def __init__(self, store: Any, out: _Writer, now: datetime) -> None:
        (stats,) = store.batch([Stats("", now)])
        self.store, self.now, self.spaces = store, now, sorted(stats.spaces)
        self.lines = _Lines(out)
        self.lines.write({"format": FORMAT, "kind": KIND, "spaces": self.spaces})
        self.scopes = self.items = self.revisions = self.evidence = self.vectors = 0
        self.ids: set[str] = set()  # an id met again (its scope changed meanwhile): once
        self.unreadable: list[str] = []

    def page(self, listed: Sequence[MemoryRecord]) -> None:
        for line in _page(self.store, listed, self.spaces, self.now):
            if line["record"]["id"] in self.ids:
                continue
            self.ids.add(line["record"]["id"])
            self.lines.write(line)
            self.items += 1
            self.revisions += len(line["history"])
            self.evidence += line["utility"] is not None
            self.vectors += len(line["vectors"])

    def end(self) -> BackupReport:
        self.lines.write(
            {
                "kind": END_KIND,
                "items": self.items,
                "unreadable": self.unreadable,
                "sha256": self.lines.sha256.hexdigest(),
            }
        )
        return BackupReport(
            self.scopes,
            self.items,
            self.revisions,
            self.evidence,
            self.vectors,
            tuple(self.unreadable),
        )


def _page(
    store: Any, listed: Sequence[MemoryRecord], spaces: Sequence[str], now: datetime
) -> Iterator[dict[str, Any]]:
    """The lines of one page of items: each record as it is in ONE batch with its
    history, evidence and vectors (an item gone since it was listed is left out)."""
    capabilities = _capabilities(store)
    ids = tuple(r.id for r in listed)
    hashes = tuple(dict.fromkeys(r.content_sha256 for r in listed))
    reads: list[Op] = [GetItems(ids, now)]
    if capabilities.supports_history:
        reads += [History(item_id, _HISTORY, now) for item_id in ids]
    if capabilities.supports_policy:
        reads.append(GetUtility(ids))
    reads += [GetVectors(space, hashes) for space in spaces]
    answers = iter(store.batch(reads))
    current = next(answers)
    histories = [next(answers) for _ in ids] if capabilities.supports_history else []
    utilities = next(answers) if capabilities.supports_policy else {}
    stored: list[dict[str, tuple[bytes, datetime]]] = [dict(next(answers)) for _ in spaces]
    # A text changed since the listing has its vectors read now: a vector is immutable
    # once stored (per space and text), so a later read finds the same one, or none.
    changed = tuple(
        dict.fromkeys(
            found.record.content_sha256
            for found in current
            if found is not None and found.record.content_sha256 not in hashes
        )
    )
    if changed:
        for vectors_of, more in zip(
            stored, store.batch([GetVectors(space, changed) for space in spaces]), strict=True
        ):
            vectors_of.update(more)
    for position, found in enumerate(current):
        if found is None:
            continue
        record = found.record
        utility = utilities.get(record.id)
        yield {
            "record": record_to_json(record),
            "history": [record_to_json(earlier) for earlier in histories[position]]
            if histories
            else [],
            "utility": None if utility is None else utility_to_json(utility),
            "vectors": [
                {
                    "space_id": space,
                    "vector": base64.b64encode(vectors_of[record.content_sha256][0]).decode(),
                    "embedded_at": format_time(vectors_of[record.content_sha256][1]),
                }
                for space, vectors_of in zip(spaces, stored, strict=True)
                if record.content_sha256 in vectors_of
            ],
        }


def _scopes(store: Any, prefix: Scope, now: datetime) -> Iterator[Scope]:
    after: Scope | None = None
    while True:
        (page,) = store.batch([ListScopes(prefix, 100, now, after)])
        yield from (entry.scope for entry in page)
        if len(page) < 100:
            return
        after = page[-1].scope


# -- reading a backup ------------------------------------------------------------------------


def read_backup(
    lines: Iterable[str], source: str = "backup", *, limits: Limits | None = None
) -> Backup:
    """Every line of a backup, checked (nothing is written): a bad line raises
    :class:`ValidationError` as ``"<source> line N: <problem>; nothing was restored"``.
    ``lines`` is the file's text split on ``\\n`` (a ``\\r`` ending a line is dropped),
    or a file object opened with ``newline=""``. Records are held to ``limits`` (the
    defaults of ``Limits()``: those of a ``Memory`` made without ``limits=``)."""
    validator = Validator(limits)
    result = Backup()
    spaces: dict[str, int] = {}
    ids: set[str] = set()
    digest = hashlib.sha256()
    version = 0
    end: Mapping[str, Any] | None = None
    number = 0
    for number, line in enumerate(lines, 1):
        line = line.removesuffix("\n").removesuffix("\r")
        if not line.strip():
            continue
        try:
            if end is not None:
                raise ValidationError("a line follows the end marker; the file was changed")
            value = loads_line(line)
            if version and isinstance(value, Mapping) and value.get("kind") == END_KIND:
                end = _end(value, len(result.items), digest.hexdigest())
                continue
            digest.update((line + "\n").encode("utf-8", "surrogatepass"))
            if not version:
                version, result.spaces = _header(value)
                spaces = {space.id: space.dimensions for space in result.spaces}
                continue
            item = _item(value, spaces, validator)
            if item.record.id in ids:
                raise ValidationError(f"id {item.record.id!r} is on an earlier line too")
            ids.add(item.record.id)
            result.items.append(item)
            result.lines.append(number)
        except EngramError as exc:
            raise ValidationError(f"{source} line {number}: {exc}; nothing was restored") from None
    if not version:
        raise ValidationError(f"{source} is empty: it has no header line; nothing was restored")
    if end is None and version >= 2:
        raise ValidationError(
            f"{source} ends at line {number} without its end marker: the file was cut short "
            f"(it holds {len(result.items)} memories); nothing was restored. Take the backup "
            "again, or copy the whole file"
        )
    result.ended = end is not None
    result.unreadable = tuple(end["unreadable"]) if end is not None else ()
    return result


def _header(value: object) -> tuple[int, list[EmbeddingSpace]]:
    if not isinstance(value, Mapping) or value.get("kind") != KIND:
        raise ValidationError(
            f'the first line is not a backup header ({{"kind": "{KIND}", ...}}); an export is '
            "read back with `engramdb import`"
        )
    version = value.get("format")
    if isinstance(version, bool) or version not in (1, FORMAT):
        newer = type(version) is int and version > FORMAT
        upgrade = "; it was written by a newer engramdb: upgrade engramdb to restore it"
        raise ValidationError(
            f"backup format {shown(version)} is not {FORMAT}" + (upgrade if newer else "")
        )
    _fields(value, ("format", "kind", "spaces"), "the header")
    listed = value["spaces"]
    if not isinstance(listed, list) or not all(isinstance(s, str) for s in listed):
        raise ValidationError("the header's spaces must be a list of space ids")
    return int(version), [EmbeddingSpace.from_id(space_id) for space_id in listed]


def _end(value: Mapping[str, Any], items: int, sha256: str) -> Mapping[str, Any]:
    """The end marker, checked against the lines before it."""
    end = _fields(value, _END_KEYS, "the end marker")
    if end["items"] != items or isinstance(end["items"], bool):
        raise ValidationError(
            f"the end marker counts {shown(end['items'])} memories but the file has {items}; "
            "lines are missing or were added"
        )
    unreadable = end["unreadable"]
    if not isinstance(unreadable, list) or not all(isinstance(i, str) for i in unreadable):
        raise ValidationError("the end marker's unreadable must be a list of ids")
    if end["sha256"] != sha256:
        raise ValidationError(
            "the lines before the end marker are not the ones the backup wrote (their "
            "SHA-256 differs); the file was changed or damaged"
        )
    return end


def _item(value: object, spaces: Mapping[str, int], validator: Validator) -> BackupItem:
    line = _fields(value, _LINE_KEYS, "an item line")
    record = validator.stored_record(record_from_json(line["record"]))
    if not isinstance(line["history"], list):
        raise ValidationError("the history must be a list of records, newest first")
    history = tuple(
        validator.stored_record(record_from_json(earlier)) for earlier in line["history"]
    )
    check_restore(None, RestoreItem(record, record.created_at, history))
    utility = None if line["utility"] is None else utility_from_json(line["utility"])
    if not isinstance(line["vectors"], list):
        raise ValidationError("the vectors must be a list")
    vectors: list[tuple[str, bytes, datetime]] = []
    for entry in line["vectors"]:
        entry = _fields(entry, ("space_id", "vector", "embedded_at"), "a vector")
        space = entry["space_id"]
        if not isinstance(space, str) or space not in spaces:  # a list: not even hashable
            raise ValidationError(f"vector space {shown(space)} is not in the header's spaces")
        if any(space == seen for seen, _, _ in vectors):
            raise ValidationError(f"the item has two vectors in space {shown(space)}")
        if not isinstance(entry["vector"], str):
            raise ValidationError("a vector must be base64 text")
        try:
            raw = base64.b64decode(entry["vector"], validate=True)
        except (binascii.Error, ValueError):
            raise ValidationError("a vector is not base64 text") from None
        check_unit_vector(raw, spaces[space])
        vectors.append((space, raw, parse_time(entry["embedded_at"], "a vector's embedded_at")))
    return BackupItem(record, history, utility, tuple(vectors))


# -- restore -------------------------------------------------------------------------------


def restore(
    store: Any,
    lines: Iterable[str] | Backup,
    on_conflict: OnConflict = "refuse",
    *,
    now: datetime | None = None,
    batch_size: int | None = None,
    source: str = "backup",
    embedder: Embedder | None = None,
    trust_vectors: bool = False,
    limits: Limits | None = None,
) -> RestoreReport:
    """Restore a backup's lines (or the :class:`Backup` :func:`read_backup` read) into
    ``store`` (a sync store); see the module docstring.

    Every line is read and checked, every id looked up in ``store`` and, with
    ``embedder``, every vector of its space checked against its text, before the first
    write: a bad line raises :class:`ValidationError` naming it, and with
    ``on_conflict="refuse"`` an id the target holds raises :class:`ConflictError`;
    either way nothing is written. Then one atomic batch writes it all (``batch_size``:
    that many items per batch). ``source`` names the backup in those errors.
    """
    if on_conflict not in ("refuse", "skip", "replace"):
        raise ValidationError(
            f"on_conflict={shown(on_conflict)} is not one of 'refuse', 'skip', 'replace'"
        )
    if batch_size is not None and (
        isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1
    ):
        raise ValidationError(
            f"batch_size={shown(batch_size)} must be a whole number from 1 up, or None for "
            "one atomic batch"
        )
    now = now or datetime.now(UTC)
    data = lines if isinstance(lines, Backup) else read_backup(lines, source, limits=limits)
    held = _held(store, data.items, now)
    elsewhere = [i for i, scope in held.items() if scope is not None]
    if elsewhere:
        raise ConflictError(
            f"{_ids(elsewhere)} of {source} live in another scope of the target than in the "
            "backup; nothing was restored: a restore never moves or deletes a memory of "
            "another scope. Forget them there first, or restore into another database"
        )
    if held and on_conflict == "refuse":
        raise ConflictError(
            f"the target already holds {len(held)} of the {len(data.items)} memories of "
            f"{source} ({_ids(list(held))}); nothing was restored: restore with "
            "--on-conflict skip to keep the target's, or --on-conflict replace to overwrite "
            "them with the backup's (on_conflict= in Python)"
        )
    wanted = [item for item in data.items if on_conflict != "skip" or item.record.id not in held]
    puts, checked, left_out = _vectors(data, wanted, embedder, trust_vectors, now, source)
    spaces = sorted({space for space, _sha in puts})
    registered = [s for s in data.spaces if s.id in spaces]
    if embedder is not None and embedder.space.id in spaces and embedder.space not in registered:
        registered.append(embedder.space)
    policy = _capabilities(store).supports_policy
    writes: list[list[Op]] = []
    step = batch_size or max(1, len(wanted))
    for start in range(0, len(wanted), step):
        chunk = wanted[start : start + step]
        ops: list[Op] = [
            DeleteItem(item.record.id, ScopeSet.of(item.record.scope))
            for item in chunk
            if item.record.id in held
        ]
        ops += [
            RestoreItem(item.record, now, item.history, item.utility if policy else None)
            for item in chunk
        ]
        hashes = {item.record.content_sha256 for item in chunk}
        ops += [vector for (space, sha), vector in puts.items() if sha in hashes]
        writes.append(ops)
    if registered and wanted:
        writes[0][:0] = [RegisterSpace(space, now) for space in registered]
    for ops in writes:
        store.batch(ops)
    replaced = sum(item.record.id in held for item in wanted)
    return RestoreReport(
        restored=len(wanted),
        skipped=len(data.items) - len(wanted),
        replaced=replaced,
        vectors=len(puts),
        spaces=len(registered) if wanted else 0,
        evidence_dropped=0 if policy else sum(item.utility is not None for item in wanted),
        vectors_checked=checked,
        vectors_left_out=left_out,
        unreadable=data.unreadable,
        ended=data.ended,
    )


def _ids(ids: Sequence[str]) -> str:
    first = ", ".join(repr(i) for i in ids[:_SHOWN_IDS])
    more = f" and {len(ids) - _SHOWN_IDS} more" if len(ids) > _SHOWN_IDS else ""
    return f"ids {first}{more}"


def _held(store: Any, items: Sequence[BackupItem], now: datetime) -> dict[str, Scope | None]:
    """The ids of ``items`` that are live items of ``store``: None where the target holds
    the id in the item's own scope, else the scope it holds it in."""
    held: dict[str, Scope | None] = {}
    for start in range(0, len(items), 500):
        chunk = items[start : start + 500]
        (found,) = store.batch([GetItems(tuple(item.record.id for item in chunk), now)])
        for item, there in zip(chunk, found, strict=True):
            if there is not None:
                scope = there.record.scope
                held[item.record.id] = None if scope == item.record.scope else scope
    return held


def _vectors(
    data: Backup,
    items: Sequence[BackupItem],
    embedder: Embedder | None,
    trust: bool,
    now: datetime,
    source: str,
) -> tuple[dict[tuple[str, str], PutVector], int, int]:
    """The vectors to store for ``items``, keyed by (space, hash): all the file's with
    ``trust``; else those of ``embedder``'s space, each checked against its text embedded
    again (a mismatch refuses the file) and stored as embedded now unless the bytes are
    the file's. Also how many were checked and how many left out."""
    given: dict[tuple[str, str], tuple[int, str, bytes, datetime]] = {}
    for item, number in zip(data.items, data.lines or [0] * len(data.items), strict=True):
        for space, raw, at in item.vectors:
            key = (space, item.record.content_sha256)
            given.setdefault(key, (number, item.record.text, raw, at))
    wanted = {item.record.content_sha256 for item in items}
    given = {key: value for key, value in given.items() if key[1] in wanted}
    if trust:
        return (
            {key: PutVector(key[0], key[1], raw, at) for key, (_, _, raw, at) in given.items()},
            0,
            0,
        )
    if embedder is None:
        return {}, 0, len(given)
    space = embedder.space.id
    mine = sorted(key for key in given if key[0] == space)
    pairs = [(given[key][1], given[key][2]) for key in mine]
    puts: dict[tuple[str, str], PutVector] = {}
    found = cosines(embedder, pairs)[1] if pairs else []
    for key, (cosine, blob) in zip(mine, found, strict=True):
        number, _text, raw, at = given[key]
        if cosine < TOLERANCE:
            raise ValidationError(
                f"{source} line {number}: its vector in {space} does not belong to its text "
                f"(cosine {cosine:.3f} to the text embedded now, below {TOLERANCE}); nothing "
                "was restored. Restore without an embedder to leave the vectors out (the "
                "memories are embedded again later), or with trust_vectors (--trust-vectors) "
                "for a backup you made yourself"
            )
        # The text's own vector, as a write stores it; the file's time only for its bytes.
        puts[key] = (
            PutVector(space, key[1], raw, at)
            if blob == raw
            else PutVector(space, key[1], blob, now)
        )
    return puts, len(mine), len(given) - len(mine)
