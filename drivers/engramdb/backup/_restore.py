"""Reading a backup and restoring it into a store: every line checked, every id looked
up, then one atomic batch (``engramdb.backup``)."""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from engramdb import (
    ConflictError,
    Embedder,
    EmbeddingSpace,
    EngramError,
    Scope,
    ValidationError,
)
from engramdb.json_format import (
    loads_line,
    parse_time,
    record_from_json,
)
from engramdb.store import (
    DeleteItem,
    GetItems,
    Op,
    PutVector,
    RegisterSpace,
    RestoreItem,
    ScopeSet,
    check_restore,
    check_unit_vector,
)
from engramdb.validate import Limits, Validator, shown
from engramdb.vector_check import TOLERANCE, cosines

from ._format import (
    _END_KEYS,
    _LINE_KEYS,
    _SHOWN_IDS,
    END_KIND,
    FORMAT,
    KIND,
    Backup,
    BackupItem,
    OnConflict,
    RestoreReport,
    _fields,
    utility_from_json,
)
from ._write import _capabilities

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
