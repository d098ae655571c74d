"""Scope validation: which characters a scope part may hold."""

from __future__ import annotations

import pytest

from engramdb import ValidationError
from engramdb._base.types import validate_scope


@pytest.mark.parametrize("char", ["\x00", "\t", "\x1f", "\x7f", "\x85", "\x9f"])
def test_c0_del_and_c1_control_characters_are_refused(char: str) -> None:
    with pytest.raises(ValidationError, match="control character"):
        validate_scope(("acme", f"user{char}42"))


@pytest.mark.parametrize("part", ["u 42", "\xa0nbsp", "é", "用户", "😀", "a/b:c"])
def test_printable_text_is_kept_as_given(part: str) -> None:
    assert validate_scope(["acme", part]) == ("acme", part)
