"""A document sent in parts (``remember_document_part``): the parts held until the last
one arrives, in the memory's own process memory, never in its store.

Nothing of a document is visible before its last part arrives: the parts wait here,
and the request that completes them remembers the whole text as one document
(``remember_document``). Sending a part again replaces it (the same part: nothing
changes); a restart forgets the parts held, and the answer to the next part says which
it holds, so the sender sends the others again. A memory holds at most
:data:`MAX_UPLOADS` unfinished documents (a new one beyond them drops the one left
longest) of at most :data:`MAX_PARTS` parts each. Standard library only.
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict

from engramdb._base.errors import ValidationError, shown
from engramdb._base.types import Scope

__all__ = ["MAX_PARTS", "MAX_UPLOADS", "DocumentParts"]

MAX_PARTS = 64
"""Most parts one document is sent in."""
MAX_UPLOADS = 8
"""Most documents a memory holds parts of at once."""

_SHA256 = re.compile(r"[0-9a-f]{64}")
_Key = tuple[Scope, str, str, int]


class DocumentParts:
    """The parts held of each unfinished document, by its scope, source, SHA-256 and
    count of parts."""

    def __init__(self) -> None:
        self._held: OrderedDict[_Key, dict[int, str]] = OrderedDict()

    def add(
        self, scope: Scope, source: str, sha256: object, part: object, parts: object, text: str
    ) -> tuple[_Key, dict[int, str]]:
        """Hold ``text`` as part ``part`` of ``parts``; the upload's key and every part it
        holds now (checked: a ``ValidationError`` names the bad value, and holds nothing)."""
        if isinstance(parts, bool) or not isinstance(parts, int) or not 1 <= parts <= MAX_PARTS:
            raise ValidationError(f"parts={shown(parts)} must be a whole number in 1..{MAX_PARTS}")
        if isinstance(part, bool) or not isinstance(part, int) or not 0 <= part < parts:
            raise ValidationError(
                f"part={shown(part)} must be a part's position, from 0 to {parts - 1}"
            )
        if not isinstance(sha256, str) or _SHA256.fullmatch(sha256) is None:
            raise ValidationError(
                f"sha256={shown(sha256)} must be the SHA-256 of the whole text's UTF-8, in "
                "64 lower-case hex digits"
            )
        key = (scope, source, sha256, parts)
        held = self._held.pop(key, {})
        held[part] = text
        self._held[key] = held  # the most recent last
        while len(self._held) > MAX_UPLOADS:
            self._held.popitem(last=False)
        return key, held

    def whole(self, key: _Key, held: dict[int, str]) -> str:
        """The text of a complete upload, checked against its SHA-256 (a mismatch drops
        the parts: the sender sends them again)."""
        text = "".join(held[position] for position in range(key[3]))
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        if digest != key[2]:
            self.drop(key)
            raise ValidationError(
                f"the {key[3]} parts of {shown(key[1])} do not make the text of the sha256 "
                "sent with them (a part differs); send every part again"
            )
        return text

    def drop(self, key: _Key) -> None:
        self._held.pop(key, None)
