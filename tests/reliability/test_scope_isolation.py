"""Scope isolation as a property, in every store and both faces.

Hypothesis draws scopes from parts that are prefixes of each other and hold ``%`` and
``_`` (LIKE wildcards), ``/`` and quotes, memories across them with texts from a shared
vocabulary (so every query matches in many scopes), and selections of scopes and
``ScopePrefix`` objects. A plain model (a list of (id, scope, text)) says what each call
may see: no recall, list, get, list_scopes, forget_scope, forget_where or bound view
ever returns or touches an item outside the scopes (or whole-part prefixes) it named
(the property: isolation_property.py; workers/tests runs it on D1 and Durable Objects).
"""

from __future__ import annotations

import pytest
from isolation_faces import FACES, isolation_memory
from isolation_property import CI_EXAMPLES, check_isolation


@pytest.mark.parametrize(("kind", "face"), FACES, ids=[f"{k}-{f}" for k, f in FACES])
def test_no_call_sees_or_touches_an_item_outside_what_it_named(
    kind: str, face: str, tmp_path_factory: pytest.TempPathFactory, long_factor: int
) -> None:
    directory = tmp_path_factory.mktemp(f"{kind}-{face}")
    check_isolation(lambda: isolation_memory(kind, face, directory), CI_EXAMPLES * long_factor)
