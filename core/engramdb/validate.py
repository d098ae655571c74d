"""Argument checks with engramdb's messages, for drivers and faces that take arguments.

Each check returns the value in the form engramdb uses, or raises one
``ValidationError`` whose message names the value and the fix:

* :class:`Limits` (the input limits) and :class:`Validator`, which runs every check a
  memory operation makes before its first effect;
* :func:`check_int` and :func:`check_float`: a number within bounds (``bool`` refused);
* :func:`validate_scope`: a scope as a tuple of 1..16 non-empty strings;
* :func:`shown`: ``repr(value)`` cut short, as an error message shows a value.

Nothing here touches a store, so a bad argument changes nothing anywhere. Public and
stable (``docs/stores.md``, "The driver kit"). Standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from engramdb._base.clock import from_ms, to_ms
from engramdb._base.errors import ValidationError, shown
from engramdb._base.types import (
    MemoryRecord,
    Scope,
    ScopePrefix,
    Utility,
    check_unicode,
    is_finite_number,
    utf8,
    validate_scope,
)
from engramdb.store import ScopeSet
from engramdb.store._filter import Filter, parse_filter

__all__ = ["Limits", "Validator", "check_float", "check_int", "shown", "validate_scope"]

_MAX_JSON_INT = 2**63  # SQLite's JSON functions read integers beyond int64 as floats
# expires_at must be a time Python's datetime can hold in UTC: years 1 to 9999.
_FIRST_MS = to_ms(datetime(1, 1, 1, tzinfo=UTC))
_LAST_MS = to_ms(datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC))
# Revisions and counters a store reaches: exact in JSON and in every client (JavaScript
# numbers), as expected_revision is; a larger one is no store's but a forged line's.
_MAX_COUNT = 2**53 - 1
_MAX_CONTEXTS = 64  # Policy.max_contexts is at most this


@dataclass(frozen=True, slots=True)
class Limits:
    """Input limits. Every one is checked before anything is stored."""

    max_text_bytes: int = 32 * 1024
    max_metadata_bytes: int = 16 * 1024
    max_metadata_depth: int = 32
    max_labels: int = 64
    max_top_k: int = 1000
    max_id_chars: int = 128
    max_filter_size: int = 256
    max_filter_depth: int = 8
    max_filter_bytes: int = 8 * 1024


def check_int(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValidationError(f"{name}={shown(value)} must be an integer from {low} to {high}")
    return value


def check_float(name: str, value: object, low: float, high: float) -> float:
    """``value`` as a float, if it is a finite number from ``low`` to ``high``. The bounds
    are compared before ``float()``, so an integer of any size is refused, not overflowed."""
    if not is_finite_number(value) or not low <= value <= high:
        raise ValidationError(f"{name}={shown(value)} must be a number from {low} to {high}")
    return float(value)


def _no_nul(value: str, what: str) -> str:
    if "\x00" in value:  # SQLite's JSON and string functions stop at it; Postgres refuses it
        raise ValidationError(
            f"{what} contains a NUL character (U+0000) at position {value.index(chr(0))}; remove it"
        )
    return check_unicode(value, what)


def _evaluations(what: str, count: object, total: object) -> None:
    """``count`` evaluations summing to ``total``, each in [-1, 1]."""
    checked = check_int(f"{what}'s eval_count", count, 0, _MAX_COUNT)
    if not is_finite_number(total) or abs(total) > checked * (1 + 1e-9):
        raise ValidationError(
            f"{what}'s eval_sum is {shown(total)} over {checked} evaluations; each evaluation "
            "is in [-1, 1], so the sum must be a number within ±eval_count"
        )


class Validator:
    """The argument checks, bound to one set of :class:`Limits`."""

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()

    def text(self, text: object, what: str = "text") -> str:
        if not isinstance(text, str):
            raise ValidationError(f"{what} must be a string, not {type(text).__name__}")
        if not text.strip():
            raise ValidationError(f"{what} is empty or only whitespace; pass some text")
        _no_nul(text, what)
        size = len(utf8(text, what))
        if size > self.limits.max_text_bytes:
            raise ValidationError(
                f"{what} is {size} bytes of UTF-8, over the limit of "
                f"{self.limits.max_text_bytes}; split it or raise Limits.max_text_bytes"
            )
        return text

    def metadata(self, metadata: object) -> dict[str, object]:
        if metadata is None:
            return {}
        if not isinstance(metadata, Mapping) or not all(isinstance(k, str) for k in metadata):
            raise ValidationError(
                f"metadata={shown(metadata)} must be a JSON object: a dict with string keys"
            )
        try:
            encoded = json.dumps(dict(metadata), ensure_ascii=False, allow_nan=False)
            loaded: dict[str, object] = json.loads(encoded)
        except (TypeError, ValueError) as exc:
            if "integer string conversion" in str(exc):  # Python's own hint is no fix here
                raise ValidationError(
                    "metadata holds an integer of more than 4,300 digits; store it as a string"
                ) from None
            raise ValidationError(
                f"metadata is not JSON-serialisable ({exc}); use str, numbers, bools, "
                "None, lists and dicts"
            ) from None
        except RecursionError:  # deeper than this interpreter can encode
            raise self._too_deep("metadata") from None
        self._json_value(loaded, "metadata", 1)  # depth first: the more useful error
        size = len(utf8(encoded, "metadata as JSON"))
        if size > self.limits.max_metadata_bytes:
            raise ValidationError(
                f"metadata is {size} bytes as JSON, over the limit "
                f"of {self.limits.max_metadata_bytes}; store less or raise "
                "Limits.max_metadata_bytes"
            )
        return loaded

    def _too_deep(self, path: str) -> ValidationError:
        return ValidationError(
            f"{path} is nested deeper than {self.limits.max_metadata_depth} levels; "
            "flatten it or raise Limits.max_metadata_depth"
        )

    def _json_value(self, value: object, path: str, depth: int) -> None:
        """NUL-free strings, integers SQLite keeps exact, nesting within the limit."""
        if isinstance(value, str):
            _no_nul(value, path)
        elif isinstance(value, int) and not isinstance(value, bool):
            if not -_MAX_JSON_INT <= value < _MAX_JSON_INT:
                raise ValidationError(
                    f"{path}={value} is too large; integers must fit 64 bits, from -2**63 "
                    "to 2**63 - 1 (store it as a string)"
                )
        elif isinstance(value, dict | list):
            if depth > self.limits.max_metadata_depth:
                raise self._too_deep(path)
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, str):
                    _no_nul(key, f"a key in {path}")
                self._json_value(item, f"{path}[{shown(key)}]", depth + 1)

    def labels(self, labels: object) -> dict[str, list[str]]:
        if labels is None:
            return {}
        if not isinstance(labels, Mapping):
            raise ValidationError(
                f"labels={shown(labels)} must be a dict of label name to a list of strings"
            )
        checked: dict[str, list[str]] = {}
        count = 0
        for name, values in labels.items():
            if not isinstance(name, str) or not name.strip():
                raise ValidationError(f"label name {shown(name)} must be a non-empty string")
            _no_nul(name, "a label name")
            if isinstance(values, str):
                values = [values]
            if not isinstance(values, list | tuple) or not all(
                isinstance(v, str) and v for v in values
            ):
                raise ValidationError(
                    f"labels[{shown(name)}]={shown(values)} must be a list of non-empty strings"
                )
            checked[name] = sorted({_no_nul(v, f"labels[{name!r}]") for v in values})
            count += len(checked[name])
        if count > self.limits.max_labels:
            raise ValidationError(
                f"{count} label values given; the limit is {self.limits.max_labels}"
            )
        return checked

    @staticmethod
    def importance(importance: object) -> float:
        return check_float("importance", importance, 0.0, 1.0)

    @staticmethod
    def expires_at(expires_at: object) -> datetime | None:
        if expires_at is None:
            return None
        if not isinstance(expires_at, datetime):
            raise ValidationError(
                f"expires_at={shown(expires_at)} must be a timezone-aware datetime or None"
            )
        ms = to_ms(expires_at)
        if not _FIRST_MS <= ms <= _LAST_MS:
            raise ValidationError(
                f"expires_at={expires_at.isoformat()} is outside the years 1 to 9999 in UTC; "
                "pass a time from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z, or None "
                "for no expiry"
            )
        return from_ms(ms)

    def id(self, value: object) -> str:
        if not isinstance(value, str) or not value.strip() or len(value) > self.limits.max_id_chars:
            raise ValidationError(
                f"id={shown(value)} must be a non-empty string of at most "
                f"{self.limits.max_id_chars} characters"
            )
        if any(ord(c) < 0x20 for c in value):
            raise ValidationError(f"id={shown(value)} contains a control character; remove it")
        return check_unicode(value, "id")

    def stored_record(self, record: MemoryRecord) -> MemoryRecord:
        """A whole record as a restore takes it (a backup's item or one of its earlier
        revisions): every field held to the checks ``remember`` and ``update`` make (id,
        scope, text, metadata, labels, importance, expiry), and the fields a store sets
        as a store sets them (a revision from 1 to 2**53 - 1, ``updated_at`` never
        before ``created_at``). Returns it with its labels in their stored form (each
        list sorted, without repeats)."""
        self.id(record.id)
        validate_scope(record.scope)
        self.text(record.text, f"the text of {record.id!r}")
        self.metadata(record.metadata)
        labels = self.labels(record.labels)
        self.importance(record.importance)
        self.expires_at(record.expires_at)
        check_int(f"the revision of {record.id!r}", record.revision, 1, _MAX_COUNT)
        if record.updated_at < record.created_at:
            raise ValidationError(
                f"{record.id!r} was updated at {record.updated_at.isoformat()}, before it was "
                f"created ({record.created_at.isoformat()}); a store never dates an update "
                "before the creation: fix updated_at"
            )
        return record if labels == record.labels else replace(record, labels=labels)

    @staticmethod
    def evidence(utility: Utility) -> Utility:
        """A memory's policy evidence as a restore takes it, held to what the policy
        writes: whole counts from 0 to 2**53 - 1, sums within one unit per evaluation
        (each is a share of a score in [-1, 1]), a manual value in [-1, 1], at most 64
        label contexts with distinct non-empty keys."""
        check_int("exposures", utility.exposures, 0, _MAX_COUNT)
        _evaluations("the evidence", utility.eval_count, utility.eval_sum)
        if utility.manual is not None:
            check_float("the manual value", utility.manual, -1.0, 1.0)
        if len(utility.contexts) > _MAX_CONTEXTS:
            raise ValidationError(
                f"the evidence holds {len(utility.contexts)} label contexts; a memory keeps "
                f"at most {_MAX_CONTEXTS} (Policy.max_contexts)"
            )
        keys: set[str] = set()
        for context in utility.contexts:
            key = context.key
            if not isinstance(key, str) or not key:
                raise ValidationError(f"a label context's key is {shown(key)}; it must be text")
            _no_nul(key, "a label context's key")
            if key in keys:
                raise ValidationError(
                    f"the label context {shown(key)} is in the evidence twice; keep one"
                )
            keys.add(key)
            _evaluations(f"the context {shown(key)}", context.eval_count, context.eval_sum)
        return utility

    @staticmethod
    def expected_revision(value: object) -> int | None:
        if value is None:
            return None
        return check_int("expected_revision", value, 0, 2**53 - 1)

    @staticmethod
    def selection(scope: object, *, descendants: bool = False) -> ScopeSet:
        """One scope, or a :class:`ScopePrefix` (``descendants=True``: the scope and every
        scope under it)."""
        if not isinstance(descendants, bool):
            raise ValidationError(f"descendants={shown(descendants)} must be True or False")
        if isinstance(scope, ScopePrefix):
            return ScopeSet(prefixes=(scope.scope,))
        checked = validate_scope(scope)
        return ScopeSet(prefixes=(checked,)) if descendants else ScopeSet(exact=(checked,))

    @staticmethod
    def scopes(scopes: object) -> ScopeSet:
        """A list of scopes and :class:`ScopePrefix` objects."""
        if isinstance(scopes, ScopePrefix) or (
            isinstance(scopes, tuple) and scopes and all(isinstance(p, str) for p in scopes)
        ):
            raise ValidationError(
                f"scopes={shown(scopes)} looks like a single scope; pass a list of scopes, "
                f"e.g. scopes=[{shown(scopes)}]"
            )
        if isinstance(scopes, str | bytes) or not isinstance(scopes, Iterable):
            raise ValidationError(
                f"scopes={shown(scopes)} must be a list of scopes, e.g. [('acme', 'user', 'u42')]"
            )
        exact: list[Scope] = []
        prefixes: list[Scope] = []
        for scope in scopes:
            if isinstance(scope, ScopePrefix):
                prefixes.append(scope.scope)
            else:
                exact.append(validate_scope(scope))
        if not exact and not prefixes:
            raise ValidationError("scopes is empty; name at least one scope to recall from")
        return ScopeSet(tuple(dict.fromkeys(exact)), tuple(dict.fromkeys(prefixes)))

    def filter(self, spec: object) -> Filter | None:
        """A parsed filter within the size, depth and byte limits (the byte limit keeps
        its SQL well under D1's statement length)."""
        checked = parse_filter(
            spec, max_size=self.limits.max_filter_size, max_depth=self.limits.max_filter_depth
        )
        if checked is not None:
            size = len(utf8(json.dumps(spec, ensure_ascii=False, default=str), "the filter"))
            if size > self.limits.max_filter_bytes:
                raise ValidationError(
                    f"the filter is {size} bytes as JSON, over the limit of "
                    f"{self.limits.max_filter_bytes}; use fewer or shorter conditions, or "
                    "raise Limits.max_filter_bytes"
                )
        return checked

    def required_filter(self, spec: object) -> Filter:
        checked = self.filter(spec)
        if checked is None:
            raise ValidationError(
                "forget_where() needs a non-empty filter, e.g. {'metadata': {'src': 'chat'}}; "
                "use forget_scope() to forget a whole scope"
            )
        return checked

    @staticmethod
    def flag(name: str, value: object) -> bool:
        if not isinstance(value, bool):
            raise ValidationError(f"{name}={shown(value)} must be True or False")
        return value

    @staticmethod
    def prefix(prefix: object) -> Scope:
        """A scope prefix for listing: ``()`` (everything) or a scope."""
        if isinstance(prefix, tuple | list) and not prefix:
            return ()
        return validate_scope(prefix)

    @staticmethod
    def cursor(cursor: object) -> Scope | None:
        return None if cursor is None else validate_scope(cursor)

    @staticmethod
    def remember_item(position: int, item: object, keys: frozenset[str]) -> Mapping[str, Any]:
        if not isinstance(item, Mapping):
            raise ValidationError(
                f"item {position} is {shown(item)}; pass a dict with text and scope"
            )
        if not keys.issuperset(item) or "text" not in item or "scope" not in item:
            unknown = set(item) - keys
            raise ValidationError(
                f"item {position} has unknown keys {sorted(map(str, unknown))} or lacks "
                f"text/scope; allowed keys are {sorted(keys)}"
            )
        return item
