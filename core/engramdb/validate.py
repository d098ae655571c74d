"""Argument checks with engramdb's messages, for drivers and faces that take arguments.

Each check returns the value in the form engramdb uses, or raises one
``ValidationError`` whose message names the value and the fix:

* :class:`Limits` (the input limits) and :class:`Validator`, which runs every check a
  memory operation makes before its first effect;
* :func:`check_int` and :func:`check_float`: a number within bounds (``bool`` refused);
* :func:`validate_scope`: a scope as a tuple of 1..16 non-empty strings;
* :func:`shown`: ``repr(value)`` cut short, as an error message shows a value.

Public and stable (``docs/stores.md``, "The driver kit"). Standard library only.
"""

from ._errors import shown
from ._flows.validate import Limits, Validator, check_float, check_int
from ._types import validate_scope

__all__ = ["Limits", "Validator", "check_float", "check_int", "shown", "validate_scope"]
