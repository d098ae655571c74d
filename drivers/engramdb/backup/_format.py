"""The backup format: its version and kinds, the item and report types, and the
policy evidence as JSON (``engramdb.backup``, ``docs/storage-format.md#backups``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from engramdb import (
    ContextUtility,
    EmbeddingSpace,
    MemoryRecord,
    Utility,
    ValidationError,
)
from engramdb.json_format import (
    format_time,
    parse_time,
)
from engramdb.validate import Validator, shown

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
