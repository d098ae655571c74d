"""Pure helpers to read provider responses and validate the vectors in them."""

from __future__ import annotations

import base64
import binascii
import json
import math
from array import array
from collections.abc import Callable
from typing import Any

import httpx

from engramdb import CorruptDataError, ProviderError
from engramdb.store import decode_f32

__all__ = [
    "GarbledAnswer",
    "base64_vector",
    "check_vectors",
    "field",
    "float_vector",
    "json_payload",
    "list_field",
]


class GarbledAnswer(ProviderError):
    """A successful answer damaged on its way: a number too large for a float.

    The retry flow sends the request again, as for an HTTP 503, and raises a plain
    :class:`~engramdb.ProviderError` once the retries are used up.
    """


# float32 holds at most about 3.4e38: an integer literal of more digits cannot be a vector
# value (and int() refuses literals of more than 4,300 digits with a ValueError).
_MAX_INT_DIGITS = 39


def _int_literal(text: str) -> int | float:
    return int(text) if len(text.lstrip("-")) <= _MAX_INT_DIGITS else math.inf


def json_payload(response: httpx.Response, provider: str) -> Any:
    """The JSON body of a successful response, or ``ProviderError`` if it is not JSON.

    A number too large for a float is read as infinite (:func:`float_vector` turns it
    into :class:`GarbledAnswer`); the non-standard ``NaN`` and ``Infinity`` literals are a
    ``ProviderError`` at once.
    """
    try:
        return json.loads(
            response.content, parse_int=_int_literal, parse_constant=_constant(provider)
        )
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProviderError(
            f"{provider} answered HTTP {response.status_code} with a body that is not JSON "
            f"({len(response.content)} bytes); check the base URL points at the embeddings API",
            provider=provider,
        ) from exc


def _constant(provider: str) -> Callable[[str], float]:
    def refuse(literal: str) -> float:
        raise ProviderError(
            f"{provider} returned a NaN or infinite value ({literal}); the response is "
            "unusable, nothing was stored",
            provider=provider,
        )

    return refuse


def field(obj: Any, key: str, path: str, provider: str) -> Any:
    """``obj[key]``, or ``ProviderError`` naming ``path`` if ``obj`` has no such field."""
    if not isinstance(obj, dict) or key not in obj:
        raise ProviderError(
            f"{provider} response has no field '{path}'; the API may have changed or the "
            "base URL points at another service",
            provider=provider,
        )
    return obj[key]


def list_field(obj: Any, key: str, path: str, provider: str) -> list[Any]:
    """``obj[key]`` that must be a JSON array."""
    value = field(obj, key, path, provider)
    if not isinstance(value, list):
        raise ProviderError(
            f"{provider} response field '{path}' is a {type(value).__name__}, not a list",
            provider=provider,
        )
    return value


def float_vector(values: Any, path: str, provider: str) -> array[float]:
    """A JSON array of numbers as ``array('f')``; a value too large for float32 is a
    :class:`GarbledAnswer` (retried)."""
    if not isinstance(values, list):
        raise ProviderError(
            f"{provider} response field '{path}' is a {type(values).__name__}, "
            "not a list of numbers",
            provider=provider,
        )
    try:
        vector = array("f", values)
    except TypeError as exc:
        raise ProviderError(
            f"{provider} response field '{path}' holds a value that is not a number",
            provider=provider,
        ) from exc
    except OverflowError as exc:  # an int beyond float64 that came from elsewhere
        raise _too_large(path, provider) from exc
    # float32 values summed in float64 cannot overflow: the sum is finite exactly when
    # every value is (and JSON holds no NaN: json_payload refuses the literal).
    if not math.isfinite(sum(vector)) and any(map(math.isinf, vector)):
        raise _too_large(path, provider)
    return vector


def _too_large(path: str, provider: str) -> GarbledAnswer:
    return GarbledAnswer(
        f"{provider} response field '{path}' holds a number too large for a float32 vector "
        "value; the answer was damaged",
        provider=provider,
    )


def base64_vector(value: str, path: str, provider: str) -> array[float]:
    """A base64 string of little-endian float32 values as ``array('f')``."""
    try:
        blob = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ProviderError(
            f"{provider} response field '{path}' is not valid base64", provider=provider
        ) from exc
    try:
        return decode_f32(blob)
    except CorruptDataError as exc:
        raise ProviderError(
            f"{provider} response field '{path}' is not a usable float32 vector "
            f"({len(blob)} bytes): a NaN or infinite value, or a length not a multiple of 4",
            provider=provider,
        ) from exc


def check_vectors(
    vectors: list[array[float]], *, count: int, dimensions: int | None, provider: str
) -> int:
    """Check count, dimensions, finiteness and that no vector is all zeros; return the
    dimensions (0 for no vectors).

    ``dimensions=None`` means "learn them": every vector must then have the dimensions
    of the first one.
    """
    if len(vectors) != count:
        raise ProviderError(
            f"{provider} returned {len(vectors)} vectors for {count} texts; "
            "the response is unusable, nothing was stored",
            provider=provider,
        )
    if not vectors:
        return dimensions or 0
    expected = dimensions if dimensions is not None else len(vectors[0])
    for index, vector in enumerate(vectors):
        if len(vector) != expected:
            raise ProviderError(
                f"{provider} returned a vector of {len(vector)} dimensions at position "
                f"{index}, expected {expected}; check the model and dimensions settings",
                provider=provider,
            )
        # float32 values summed in float64 cannot overflow: the sum is finite exactly
        # when every component is.
        if not math.isfinite(sum(vector)):
            raise ProviderError(
                f"{provider} returned a vector with a NaN or infinite value at position "
                f"{index}; the response is unusable, nothing was stored",
                provider=provider,
            )
        if expected and not any(vector):
            raise ProviderError(
                f"{provider} returned a vector of zeros at position {index}; it has no "
                "direction, the response is unusable, nothing was stored",
                provider=provider,
            )
    if expected == 0:
        raise ProviderError(f"{provider} returned empty vectors", provider=provider)
    return expected
