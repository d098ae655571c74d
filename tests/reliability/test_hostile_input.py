"""Hostile input: every value is stored verbatim or refused with ``ValidationError``.

Texts, queries, scopes, metadata, expiry times, limits, ids and filters built from NUL,
lone surrogates, RTL and combining marks, FTS5 and SQL syntax and megabyte strings go
through ``Memory`` on ``InMemoryStore`` and ``SqliteStore`` (a file), and as JSON bodies
through the HTTP API. No call may raise anything but ``ValidationError`` (no raw
exception, no other error), nothing is ever run as SQL (a canary memory survives every
test unchanged), and what is accepted reads back exactly as it was given.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import reprlib
from datetime import UTC, datetime, timedelta, timezone
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hostile_memory import KINDS, accepted_or_refused, hostile_memory
from hostile_values import (
    FIRST,
    JSON_NUMBERS,
    LAST,
    MB,
    NASTY_SCOPE_PARTS,
    NASTY_TEXTS,
    SYNTAX,
    aware_datetimes,
    filters,
    hostile_texts,
    metadata,
    nested,
    scopes,
    words,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engramdb import AsyncMemory, HashEmbedder, InMemoryStore, Memory, ScopePrefix, ValidationError
from engramdb.http_api import Reply, handle, parse_tokens

CI_EXAMPLES = 60


def examples(long_factor: int, base: int = CI_EXAMPLES) -> settings:
    return settings(
        max_examples=base * long_factor,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def valid_unicode(text: str) -> bool:
    return not any(0xD800 <= ord(c) <= 0xDFFF for c in text)


def acceptable_text(text: str, limit: int = 32 * 1024) -> bool:
    """What the docs promise to store: non-blank, NUL-free, valid Unicode, <= 32 KiB."""
    return (
        bool(text.strip())
        and "\x00" not in text
        and valid_unicode(text)
        and len(text.encode()) <= limit
    )


_fresh = itertools.count()


def fresh_scope() -> tuple[str, ...]:
    return ("hostile", str(next(_fresh)))


def stored_exactly(memory: Memory, record: Any, text: str, scope: tuple[str, ...]) -> None:
    got = memory.get(record.id)
    assert got is not None
    assert (got.text, got.scope) == (text, scope)
    assert (record.text, record.scope) == (text, scope)
    assert [r.id for r in memory.list(scope)] == [record.id]


# --- texts and queries -------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_known_nasty_texts_are_stored_verbatim_or_refused(kind: str, tmp_path: Path) -> None:
    """Each known-nasty text is stored and read back exactly when the docs allow it
    (non-blank, no NUL, no lone surrogate, at most 32 KiB of UTF-8), else refused with a
    ValidationError that changes nothing; as a query it answers hits or a ValidationError."""
    with hostile_memory(kind, tmp_path) as memory:
        for text in NASTY_TEXTS:
            scope = fresh_scope()
            outcome = accepted_or_refused(memory.remember, text, scope)
            if acceptable_text(text):
                assert not isinstance(outcome, ValidationError), (text[:40], outcome)
                stored_exactly(memory, outcome, text, scope)
            else:
                assert isinstance(outcome, ValidationError), text[:40]
                assert memory.list(scope) == []
            for mode in ("lexical", "vector", "hybrid"):
                accepted_or_refused(memory.recall, text, [scope], mode=mode)


@pytest.mark.parametrize("kind", KINDS)
def test_random_hostile_texts_are_stored_verbatim_or_refused(
    kind: str, tmp_path_factory: pytest.TempPathFactory, long_factor: int
) -> None:
    """Property: remember(text) stores exactly ``text`` if and only if the docs allow it,
    and otherwise raises ValidationError; recall(text) never raises anything else."""
    with hostile_memory(kind, tmp_path_factory.mktemp(kind)) as memory:

        @examples(long_factor)
        @given(text=hostile_texts)
        def check(text: str) -> None:
            scope = fresh_scope()
            outcome = accepted_or_refused(memory.remember, text, scope)
            assert isinstance(outcome, ValidationError) != acceptable_text(text), text
            if not isinstance(outcome, ValidationError):
                stored_exactly(memory, outcome, text, scope)
            accepted_or_refused(lambda: memory.recall(text, [scope], mode="hybrid"))

        check()


@pytest.mark.parametrize("kind", KINDS)
def test_query_syntax_in_a_text_is_words_never_a_query(
    kind: str, tmp_path_factory: pytest.TempPathFactory, long_factor: int
) -> None:
    """Property: a text made of FTS5/SQL syntax tokens around a plain word is found
    lexically by that word, by the whole text as a query, and by ``NOT word`` / ``-word``
    (operators are words, not logic); a neighbour without the word is never returned for
    the word."""
    with hostile_memory(kind, tmp_path_factory.mktemp(kind)) as memory:

        @examples(long_factor)
        @given(
            before=st.lists(st.sampled_from(SYNTAX), max_size=4),
            after=st.lists(st.sampled_from(SYNTAX), max_size=4),
            word=words,
            glue=st.sampled_from([" ", "", "\t"]),
        )
        def check(before: list[str], after: list[str], word: str, glue: str) -> None:
            # the word stands apart; the syntax around it may run together
            text = f"{glue.join(before)} {word} {glue.join(after)}"
            scope = fresh_scope()
            record = memory.remember(text, scope)
            other = memory.remember("an unrelated neighbour", scope)
            assert memory.get(record.id).text == text  # type: ignore[union-attr]
            for query in (word, text, f"NOT {word}", f"-{word}", f'"{word}', f"{word}*"):
                hits = memory.recall(query, [scope], mode="lexical")
                ids = [h.memory.id for h in hits]
                assert record.id in ids, (query, text)
            assert other.id not in [
                h.memory.id for h in memory.recall(word, [scope], mode="lexical")
            ]

        check()


# --- scopes ------------------------------------------------------------------------------


def acceptable_scope(scope: tuple[str, ...]) -> bool:
    return 1 <= len(scope) <= 16 and all(
        part.strip()
        and len(part) <= 256
        and valid_unicode(part)
        and not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in part)
        for part in scope
    )


@pytest.mark.parametrize("kind", KINDS)
def test_hostile_scopes_are_stored_verbatim_or_refused(
    kind: str, tmp_path_factory: pytest.TempPathFactory, long_factor: int
) -> None:
    """Property: a scope of 1-16 non-blank parts of at most 256 characters without control
    characters or lone surrogates (``%``, ``_``, ``/``, quotes and brackets included) is
    stored verbatim and selects exactly its own memory (as a scope, as a prefix and in
    list_scopes); anything else is a ValidationError."""
    with hostile_memory(kind, tmp_path_factory.mktemp(kind)) as memory:

        @examples(long_factor)
        @given(scope=scopes, tag=words)
        def check(scope: tuple[str, ...], tag: str) -> None:
            full = ("hostile-scope", tag, *scope)
            outcome = accepted_or_refused(lambda: memory.remember(f"note {tag}", full))
            if not acceptable_scope(full):
                assert isinstance(outcome, ValidationError), full
                return
            assert not isinstance(outcome, ValidationError), (full, outcome)
            stored_exactly(memory, outcome, f"note {tag}", full)
            assert [r.id for r in memory.list(ScopePrefix(full))] == [outcome.id]
            hits = memory.recall(tag, [full], mode="lexical")
            assert [h.memory.id for h in hits] == [outcome.id]
            listed = memory.list_scopes(prefix=full)
            assert [(c.scope, c.items) for c in listed] == [(full, 1)]
            assert memory.forget_scope(full) == 1

        check()


@pytest.mark.parametrize("kind", KINDS)
def test_known_nasty_scope_parts_in_every_scope_argument(kind: str, tmp_path: Path) -> None:
    """Every scope-taking call (remember, recall, list, list_scopes prefix and cursor,
    forget_scope, forget_where, bind) answers or raises ValidationError for each nasty
    part, and forgets nothing outside it."""
    with hostile_memory(kind, tmp_path) as memory:
        for part in NASTY_SCOPE_PARTS:
            scope = ("nasty", part)
            calls: list[tuple[Any, tuple[Any, ...], dict[str, Any]]] = [
                (memory.remember, ("x", scope), {}),
                (lambda s: memory.recall("x", [s, ScopePrefix(s)]), (scope,), {}),
                (memory.list, (scope,), {}),
                (lambda s: memory.list(ScopePrefix(s)), (scope,), {}),
                (memory.list_scopes, (), {"prefix": scope}),
                (memory.list_scopes, (), {"cursor": scope}),
                (memory.forget_where, (scope, {"metadata": {"k": "v"}}), {"descendants": True}),
                (memory.forget_scope, (scope,), {"descendants": True}),
                (memory.bind, (scope,), {}),
            ]
            for call, args, kwargs in calls:
                accepted_or_refused(call, *args, **kwargs)


# --- metadata ----------------------------------------------------------------------------


def _same_json(a: Any, b: Any) -> bool:
    """Equal as JSON values, with the types kept (1 is not 1.0 nor True)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_same_json, a, b))
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return bool(a == b)


@pytest.mark.parametrize("kind", KINDS)
def test_hostile_metadata_is_stored_verbatim_or_refused(
    kind: str, tmp_path_factory: pytest.TempPathFactory, long_factor: int
) -> None:
    """Property: metadata with NaN, infinities, huge or edge integers, -0.0, denormals,
    nasty strings and nesting reads back with the same JSON types and values (also after
    update), or is refused with a ValidationError."""
    with hostile_memory(kind, tmp_path_factory.mktemp(kind)) as memory:
        base = memory.remember("metadata target", fresh_scope())

        @examples(long_factor)
        @given(value=metadata)
        def check(value: dict[str, Any]) -> None:
            scope = fresh_scope()
            outcome = accepted_or_refused(lambda: memory.remember("m", scope, metadata=value))
            if isinstance(outcome, ValidationError):
                assert memory.list(scope) == []
                assert isinstance(
                    accepted_or_refused(lambda: memory.update(base.id, metadata=value)),
                    ValidationError,
                )
                return
            got = memory.get(outcome.id)
            assert got is not None and _same_json(got.metadata, value), (got.metadata, value)
            updated = memory.update(base.id, metadata=value)
            again = memory.get(base.id)
            assert again is not None and _same_json(again.metadata, value)
            assert _same_json(updated.metadata, value)

        check()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("value", "stored"),
    [
        *[
            (
                {"n": n},
                (isinstance(n, int) and -(2**63) <= n < 2**63)
                or (isinstance(n, float) and math.isfinite(n)),
            )
            for n in JSON_NUMBERS
        ],
        (nested(32), True),
        (nested(33), False),
        (nested(100_000), False),
        ({"s": "x" * MB}, False),
        ({"a\x00": 1}, False),
        ({"a": "\ud800"}, False),
        ({"\u202e": "\u0301"}, True),
    ],
    ids=lambda v: reprlib.repr(v)[:30],
)
def test_known_nasty_metadata(kind: str, tmp_path: Path, value: Any, stored: bool) -> None:
    """Each known-nasty metadata value is stored exactly, or refused, as documented
    (integers within 64 bits, finite floats, 32 levels, 16 KiB, no NUL)."""
    with hostile_memory(kind, tmp_path) as memory:
        outcome = accepted_or_refused(lambda: memory.remember("m", ("meta",), metadata=value))
        assert isinstance(outcome, ValidationError) != stored, outcome
        if stored:
            got = memory.get(outcome.id)  # type: ignore[union-attr]
            assert got is not None and _same_json(got.metadata, value)


# --- expiry ------------------------------------------------------------------------------

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
FIRST_MS = (FIRST - EPOCH) // timedelta(milliseconds=1)
LAST_MS = (LAST - EPOCH) // timedelta(milliseconds=1)


@pytest.mark.parametrize("kind", KINDS)
def test_expires_at_outside_years_1_to_9999_utc_is_a_validation_error(
    kind: str, tmp_path_factory: pytest.TempPathFactory, long_factor: int
) -> None:
    """Property: an aware expires_at whose UTC time (to the millisecond) lies within
    0001-01-01 and 9999-12-31T23:59:59.999 is kept exactly, rounded to the millisecond (half
    to even), by remember and update (float timestamps were off by up to 0.53 ms far
    from 1970); any other is a ValidationError naming the value and the accepted range (it
    was a raw ValueError from datetime before)."""
    with hostile_memory(kind, tmp_path_factory.mktemp(kind)) as memory:

        @examples(long_factor)
        @given(moment=aware_datetimes)
        def check(moment: datetime) -> None:
            target = memory.remember("expiry target", fresh_scope())
            ms = round(Fraction((moment - EPOCH) // timedelta(microseconds=1), 1000))
            inside = FIRST_MS <= ms <= LAST_MS
            for call in (
                lambda: memory.remember("e", fresh_scope(), expires_at=moment),
                lambda: memory.update(target.id, expires_at=moment),
            ):
                outcome = accepted_or_refused(call)
                if inside:
                    assert not isinstance(outcome, ValidationError), (moment, outcome)
                    assert outcome.expires_at is not None
                    assert outcome.expires_at == EPOCH + timedelta(milliseconds=ms)
                else:
                    assert isinstance(outcome, ValidationError), moment
                    assert moment.isoformat() in str(outcome)
                    assert "0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z" in str(outcome)

        check()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "ttl",
    [timedelta.max, timedelta(days=3_000_000), 1e300, float("nan"), -1, 0, True, "1"],
    ids=repr,
)
def test_a_ttl_past_the_year_9999_or_invalid_is_a_validation_error(
    kind: str, tmp_path: Path, ttl: object
) -> None:
    """A ttl that ends after 9999 (a raw OverflowError before) or is not a positive
    duration is a ValidationError naming the ttl."""
    with hostile_memory(kind, tmp_path) as memory:
        with pytest.raises(ValidationError, match="ttl="):
            memory.remember("t", ("ttl",), ttl=ttl)
        assert memory.list(("ttl",)) == []


@pytest.mark.parametrize("kind", KINDS)
def test_a_far_future_expires_at_is_kept_to_the_millisecond(kind: str, tmp_path: Path) -> None:
    """Far from 1970 a float timestamp has too few digits: 6430-01-01T00:00:00.129471Z
    became .130005 (rounded up, then 5 us off). It is kept as .129 exactly."""
    moment = datetime(6430, 1, 1, 0, 0, 0, 129471, tzinfo=UTC)
    with hostile_memory(kind, tmp_path) as memory:
        record = memory.remember("far", ("far",), expires_at=moment)
        got = memory.get(record.id)
        expected = datetime(6430, 1, 1, 0, 0, 0, 129000, tzinfo=UTC)
        assert (record.expires_at, got and got.expires_at) == (expected, expected)


def test_the_expiry_error_names_the_value_and_the_range() -> None:
    """The message shows the value as given and the range in UTC."""
    memory = Memory(InMemoryStore(), HashEmbedder())
    late = datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-5)))
    with pytest.raises(ValidationError) as info:
        memory.remember("x", ("s",), expires_at=late)
    assert str(info.value) == (
        "expires_at=9999-12-31T23:00:00-05:00 is outside the years 1 to 9999 in UTC; pass a "
        "time from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z, or None for no expiry"
    )


# --- limits, ids and filters ---------------------------------------------------------------

odd_numbers = st.one_of(
    st.integers(),
    st.sampled_from([0, -1, 2**63, 10**100, True, False, None, 1.5, float("nan"), "10", b"1"]),
)
odd_ids = st.one_of(
    hostile_texts, st.sampled_from(["x" * 128, "x" * 129, "x" * MB, 0, None, b"id", ("a",)])
)


@pytest.mark.parametrize("kind", KINDS)
def test_out_of_range_limits_and_ids_are_validation_errors(
    kind: str, tmp_path_factory: pytest.TempPathFactory, long_factor: int
) -> None:
    """Property: top_k, limits, rrf_k, history limits and ids of any value either work or
    raise ValidationError; an id that matches nothing is None/False/[], never an error."""
    with hostile_memory(kind, tmp_path_factory.mktemp(kind)) as memory:
        scope = fresh_scope()
        memory.remember("a plain memory", scope)

        @examples(long_factor)
        @given(number=odd_numbers, item_id=odd_ids)
        def check(number: Any, item_id: Any) -> None:
            for call in (
                lambda: memory.recall("plain", [scope], top_k=number),
                lambda: memory.recall("plain", [scope], rrf_k=number, fusion="rrf"),
                lambda: memory.list(scope, limit=number),
                lambda: memory.list(scope, before=item_id),
                lambda: memory.list_scopes(limit=number),
                lambda: memory.history(item_id, limit=number),
                lambda: memory.purge_expired(batch_size=number),
            ):
                accepted_or_refused(call)
            for call in (lambda: memory.get(item_id), lambda: memory.history(item_id)):
                found = accepted_or_refused(call)
                assert found in (None, []) or isinstance(found, ValidationError), found
            outcome = accepted_or_refused(lambda: memory.forget(item_id))
            assert outcome is False or isinstance(outcome, ValidationError)

        check()


@pytest.mark.parametrize("kind", KINDS)
def test_hostile_filters_answer_or_are_validation_errors(
    kind: str, tmp_path_factory: pytest.TempPathFactory, long_factor: int
) -> None:
    """Property: recall, list and forget_where with any filter answer or raise
    ValidationError; forget_where never deletes outside its scope; an accepted equality
    filter on a hostile key finds the memory holding that key and value."""
    with hostile_memory(kind, tmp_path_factory.mktemp(kind)) as memory:
        scope = fresh_scope()

        @examples(long_factor)
        @given(
            spec=filters,
            key=st.text(max_size=8),
            value=st.one_of(st.text(max_size=8), st.integers(-(2**53) + 1, 2**53 - 1)),
        )
        def check(spec: Any, key: str, value: Any) -> None:
            accepted_or_refused(lambda: memory.recall("x", [scope], filter=spec))
            accepted_or_refused(lambda: memory.list(scope, filter=spec))
            inside = fresh_scope()
            kept = accepted_or_refused(
                lambda: memory.remember("kept", inside, metadata={key: value})
            )
            accepted_or_refused(lambda: memory.forget_where(inside, spec))
            if isinstance(kept, ValidationError):
                return
            lookup = {"metadata": {key: value}}
            found = accepted_or_refused(lambda: memory.list(inside, filter=lookup))
            if not isinstance(found, ValidationError) and memory.get(kept.id) is not None:
                assert [r.id for r in found] == [kept.id], (key, value)

        check()


# --- the HTTP API ------------------------------------------------------------------------

GRANTS = parse_tokens(json.dumps({"tok": ["acme", "user", "sam"]}))


async def http(memory: AsyncMemory, method: str, url: str, body: Any = None) -> Reply:
    async def read_body() -> bytes | str:
        if body is None:
            return ""
        if isinstance(body, bytes | str):
            return body
        return json.dumps(body, allow_nan=True)

    return await handle(
        method,
        "http://127.0.0.1" + url,
        {"authorization": "Bearer tok", "content-type": "application/json"},
        read_body,
        grants=lambda: GRANTS,
        memory=lambda grant: memory,
    )


RAW_BODIES: list[bytes | str] = [
    b"\xff\xfe",
    b'{"text": "\xc3"}',
    '{"text": "\\ud800"}',
    '{"text": "a\\u0000b"}',
    '{"text": NaN}',
    '{"text": "x", "importance": Infinity}',
    '{"text": "x", "metadata": {"n": 1e999}}',
    '{"text": "x", "metadata": {"n": ' + "9" * 5000 + "}}",
    '{"text": "x", "metadata": {"n": ' + "9" * 20 + "}}",
    '{"text": "x", "metadata": {"n": -0.0}}',
    '{"text": "x"' + ', "a": 1' * 100_000 + "}",
    "[" * 100_000,
    '{"query": "x", "top_k": 1e309}',
    '{"query": "x", "top_k": 10000000000000000000000}',
    '{"query": "NEAR( \\" * AND OR NOT ^ : -", "top_k": 5}',
    '{"query": "x", "filter": {"metadata": {"a\\"]": 1}}}',
    '{"text": "x", "labels": {"\\u202e": ["\\u0301"]}}',
    '{"text": "' + "x" * (2 * MB) + '"}',
]


def http_bodies() -> st.SearchStrategy[Any]:
    fields = {
        "text": hostile_texts,
        "query": hostile_texts,
        "metadata": st.one_of(metadata, st.just(nested(100))),
        "labels": st.dictionaries(hostile_texts, st.lists(hostile_texts, max_size=2), max_size=2),
        "importance": st.one_of(st.floats(), st.sampled_from(JSON_NUMBERS)),
        "top_k": st.one_of(st.integers(), st.sampled_from(JSON_NUMBERS)),
        "filter": filters,
        "mode": st.sampled_from(["lexical", "vector", "hybrid", "sql", "'"]),
        "min_similarity": st.floats(),
        "expected_revision": st.one_of(st.integers(), st.sampled_from(JSON_NUMBERS)),
        "memories": st.lists(
            st.dictionaries(st.sampled_from(["text", "metadata"]), hostile_texts), max_size=3
        ),
    }
    return st.fixed_dictionaries({}, optional=fields)


def check_reply(reply: Reply) -> None:
    assert reply.status < 500, (reply.status, reply.body)
    assert isinstance(reply.body, dict)
    if reply.status >= 400:
        assert set(reply.body) == {"error"} and reply.body["error"]["code"]
    json.dumps(reply.body)  # the reply itself is JSON


def test_hostile_http_bodies_get_a_4xx_or_are_stored_verbatim(
    tmp_path_factory: pytest.TempPathFactory, long_factor: int
) -> None:
    """Property, through http_api.handle over SqliteStore (a file): every hostile JSON
    body sent to remember, batch, recall and update, and every raw malformed body, gets a
    4xx JSON error or succeeds; a created memory reads back with exactly the text and
    metadata sent. Never a 500."""
    from engramdb.sqlite import SqliteStore

    memory = AsyncMemory(SqliteStore(tmp_path_factory.mktemp("http") / "memory.db"), HashEmbedder())
    routes = [
        ("POST", "/v1/memories"),
        ("POST", "/v1/memories/batch"),
        ("POST", "/v1/recall"),
        ("PATCH", "/v1/memories/{target}"),
    ]

    async def send_all(body: Any) -> None:
        made = await http(memory, "POST", "/v1/memories", {"text": f"target {next(_fresh)}"})
        target = made.body["memory"]["id"]
        for method, route in routes:
            url = route.format(target=target)
            reply = await http(memory, method, url, body)
            check_reply(reply)
            if (method, url, reply.status) == ("POST", "/v1/memories", 201):
                sent_body = json.loads(body) if isinstance(body, str | bytes) else body
                sent = reply.body["memory"]
                got = await http(memory, "GET", f"/v1/memories/{sent['id']}")
                assert got.status == 200
                assert got.body["memory"]["text"] == sent_body["text"]
                assert _same_json(got.body["memory"]["metadata"], sent_body.get("metadata", {}))
                gone = await http(memory, "DELETE", f"/v1/memories/{sent['id']}")
                assert gone.status == 200  # so the next body's text is not deduplicated
        cleared = await http(memory, "DELETE", "/v1/scope")  # no text dedupes into the next
        assert cleared.status == 200

    for raw in RAW_BODIES:
        asyncio.run(send_all(raw))

    @examples(long_factor)
    @given(body=http_bodies())
    def check(body: dict[str, Any]) -> None:
        asyncio.run(send_all(body))

    check()
    asyncio.run(memory.aclose())
