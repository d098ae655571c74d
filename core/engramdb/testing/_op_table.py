"""The op-table check: a store declares the op types its batch answers, and none of
the protocol's may be missing.

Adding an op to the protocol (``engramdb.store.Op``) touches every store; this check
names each store that has not learnt it yet, without a database to run against.
"""

from __future__ import annotations

from typing import Final, get_args

from engramdb.store import (
    ConsumeSelection,
    GetUtility,
    History,
    Op,
    PackVectors,
    RecordSelection,
    SearchLexical,
    SetManual,
    TrimScope,
)
from engramdb.testing._harness import CheckFailed

__all__ = ["check_op_table"]

_OPTIONAL: Final[dict[str, tuple[type, ...]]] = {
    "supports_lexical": (SearchLexical,),
    "supports_history": (History,),
    "supports_policy": (RecordSelection, ConsumeSelection, SetManual, GetUtility, TrimScope),
    "packs_vectors": (PackVectors,),
}
"""The ops a store answers only when it declares the capability."""


def check_op_table(store: object) -> None:
    """Fail unless ``store`` (a store, or its class) declares ``OPS``, the op types its
    batch answers (a set, or a mapping keyed by op type), holding every op of the
    protocol. The ops of a capability the store's ``capabilities`` leave off
    (``supports_lexical``, ``supports_history``, ``supports_policy``) may be missing; a
    class without class-level ``capabilities`` must hold them all."""
    name = store.__name__ if isinstance(store, type) else type(store).__name__
    table = getattr(store, "OPS", None)
    if table is None:
        raise CheckFailed(
            f"{name} declares no op table; give it OPS, the frozenset of the op types its "
            "batch answers (see docs/stores.md)"
        )
    required = set(get_args(Op))
    capabilities = getattr(store, "capabilities", None)
    if capabilities is not None:
        for flag, ops in _OPTIONAL.items():
            if not getattr(capabilities, flag):
                required.difference_update(ops)
    missing = sorted(op.__name__ for op in required if op not in table)
    if missing:
        raise CheckFailed(
            f"{name}'s op table (OPS) lacks {', '.join(missing)}: its batch cannot answer "
            "them; handle them in it and add them to OPS"
        )
