"""Labels under policy: normalised, held to rules, and turned into a recall's context.

A label name or value is normalised by folding case and collapsing whitespace
(``" Topic "`` and ``"topic"`` are one label). :class:`LabelRules` bounds them: the keys
(and, per key, the values) that are allowed, and at most ``max_per_key`` values per key.
Labels a caller gives are *checked* (a violation is a ``ValidationError`` that names the
label and the rule); labels a labeler proposes are *kept* only where they obey the rules
(a labeler is best effort, so its excess is dropped, never an error).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from engramdb._base.errors import ValidationError, shown
from engramdb.validate import check_int

__all__ = ["LabelRules", "context_key", "normalized"]

Labels = dict[str, list[str]]


def _fold(text: str) -> str:
    return " ".join(text.split()).casefold()


def normalized(labels: Mapping[str, Sequence[str]]) -> Labels:
    """``labels`` with names and values case-folded and whitespace-collapsed, values
    without duplicates, sorted; a name left without values is dropped."""
    out: Labels = {}
    for name, values in labels.items():
        folded = sorted({_fold(v) for v in values} - {""})
        key = _fold(name)
        if key and folded:
            out[key] = sorted(set(out.get(key, [])) | set(folded))
    return dict(sorted(out.items()))


@dataclass(frozen=True, slots=True)
class LabelRules:
    """Which labels a bound view accepts.

    ``allowed``: label name -> allowed values (an empty list: any value); None allows
    every name. ``max_per_key``: at most this many values per name (default 3).
    """

    allowed: Mapping[str, Sequence[str]] | None = None
    max_per_key: int = 3
    _allowed: dict[str, frozenset[str]] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_int("max_per_key", self.max_per_key, 1, 100)
        folded = None
        if self.allowed is not None:
            if not isinstance(self.allowed, Mapping):
                raise ValidationError(
                    f"allowed={shown(self.allowed)} must be a dict of label name to a list "
                    "of allowed values ([] allows any value)"
                )
            folded = {_fold(k): frozenset(_fold(v) for v in vs) for k, vs in self.allowed.items()}
        object.__setattr__(self, "_allowed", folded)

    def _refusal(self, name: str, values: list[str]) -> str | None:
        allowed = self._allowed
        if allowed is not None and name not in allowed:
            return f"label {name!r} is not allowed; use one of {sorted(allowed)}"
        if allowed is not None and allowed[name]:
            wrong = [v for v in values if v not in allowed[name]]
            if wrong:
                return (
                    f"labels[{name!r}] value {wrong[0]!r} is not allowed; use one of "
                    f"{sorted(allowed[name])}"
                )
        if len(values) > self.max_per_key:
            return (
                f"labels[{name!r}] has {len(values)} values; the rules allow at most "
                f"{self.max_per_key}"
            )
        return None

    def check(self, labels: Mapping[str, Sequence[str]]) -> Labels:
        """Given labels, normalised; ``ValidationError`` for the first that breaks a rule."""
        out = normalized(labels)
        for name, values in out.items():
            refusal = self._refusal(name, values)
            if refusal is not None:
                raise ValidationError(refusal)
        return out

    def keep(self, labels: Mapping[str, Sequence[str]]) -> Labels:
        """Proposed labels, normalised, keeping only what the rules allow (the first
        ``max_per_key`` values of a name, in sorted order)."""
        out: Labels = {}
        allowed = self._allowed
        for name, values in normalized(labels).items():
            if allowed is not None and name not in allowed:
                continue
            if allowed is not None and allowed[name]:
                values = [v for v in values if v in allowed[name]]
            if values:
                out[name] = values[: self.max_per_key]
        return out


def context_key(labels: Mapping[str, Sequence[str]]) -> str:
    """The stable key of a recall's label context ("" for none): normalised JSON."""
    folded = normalized(labels)
    return json.dumps(folded, ensure_ascii=False, separators=(",", ":")) if folded else ""
