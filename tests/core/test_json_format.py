"""engramdb.json_format: the one JSON form of records, hits and export lines.

The golden file ``golden/json-format-1.jsonl`` pins the exact text of format 1: a record,
a hit and an export line with a vector, as :func:`dumps` writes them. If this test fails
because the form changed on purpose, that is a breaking change for every client: bump
``FORMAT_VERSION``, add ``json-format-2.jsonl`` and keep reading version 1 on import.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from engramdb import (
    AsyncMemory,
    HashEmbedder,
    Hit,
    Hits,
    InMemoryStore,
    Memory,
    MemoryRecord,
    ValidationError,
)
from engramdb._base.types import content_sha256
from engramdb.json_format import (
    FORMAT_VERSION,
    RECORD_FIELDS,
    dumps,
    dumps_line,
    export_from_json,
    export_to_json,
    format_time,
    hit_from_json,
    hit_to_json,
    hits_from_json,
    hits_to_json,
    loads,
    loads_line,
    parse_time,
    record_from_json,
    record_to_json,
)

GOLDEN = Path(__file__).parent / "golden" / f"json-format-{FORMAT_VERSION}.jsonl"
TEXT = "Sam moved to Lisbon — in March"
SHA = "3772250e84640a9bac3ca1e29dca40c79030798075e2827bfa6a5810606cbc8f"
VECTOR = bytes.fromhex("0000803f000000c00000003f00000000")  # [1, -2, 0.5, 0]


def golden_record() -> MemoryRecord:
    """Every field set; ``updated_at`` given at +02:00 with microseconds."""
    return MemoryRecord(
        id="01KDVDNGTR7ECJACDR43KZ4YPR",
        scope=("acme", "user", "sam"),
        text=TEXT,
        metadata={
            "source": "chat",
            "turn": 12,
            "tags": ["move", "città"],
            "confidence": 0.5,
            "edited": True,
            "note": None,
        },
        labels={"topic": ["travel", "home"]},
        importance=0.75,
        created_at=datetime(2026, 12, 1, 23, 52, 52, 123000, tzinfo=UTC),
        updated_at=datetime(2026, 12, 2, 1, 0, 0, 5000, tzinfo=timezone(timedelta(hours=2))),
        expires_at=datetime(2027, 1, 31, 12, 0, tzinfo=UTC),
        revision=3,
        content_sha256=SHA,
    )


def golden_hit(record: MemoryRecord) -> Hit:
    return Hit(
        memory=record,
        score=0.0327868852,
        similarity=0.8125,
        vector_rank=1,
        lexical_rank=2,
        bm25=1.5,
        evidence={
            "id": record.id,
            "scope": record.scope,
            "revision": 3,
            "content_sha256": SHA,
            "space_id": "hash/bow@64",
            "embedded_at": datetime(2026, 12, 1, 23, 52, 52, 124000, tzinfo=UTC),
        },
        boosts={"recency": 0.9, "utility": math.nan},
        retention=1.0,
    )


def test_golden_file_pins_record_hit_and_export_line() -> None:
    """The record, the hit and the export line are written exactly as the golden file
    holds them: scope as an array, UTC times with milliseconds and Z (the +02:00 time
    converted), UTF-8 unescaped, a NaN boost as null, keys in the documented order."""
    record = golden_record()
    written = [
        dumps(record_to_json(record)),
        dumps(hit_to_json(golden_hit(record))),
        dumps(export_to_json(record, ("hash/bow@4", VECTOR))),
    ]
    assert written == GOLDEN.read_text(encoding="utf-8").splitlines()
    assert list(loads(written[0])) == list(RECORD_FIELDS)
    assert '"updated_at":"2026-12-01T23:00:00.005Z"' in written[0]
    assert '"utility":null' in written[1]


def test_the_golden_lines_read_back_to_the_same_record_and_vector() -> None:
    """Reading format 1 back gives the record (times in UTC) and the vector bytes."""
    record_line, _, export_line = GOLDEN.read_text(encoding="utf-8").splitlines()
    record = golden_record()
    assert record_from_json(loads(record_line)) == record
    back, vector = export_from_json(loads(export_line))
    assert back == record and vector == ("hash/bow@4", VECTOR)
    assert back.updated_at.tzinfo is UTC and back.updated_at == record.updated_at


async def test_records_of_a_real_memory_round_trip() -> None:
    """record -> JSON text -> record is the identity for what a memory stores (its
    times are whole milliseconds), expiry and labels included; and a recall's answer has
    the shape of every face: status, coverage, mode, selection_id, error, hits."""
    memory = AsyncMemory(InMemoryStore(), HashEmbedder())
    stored = await memory.remember(
        "Ana prefers window seats ✈",
        ("acme", "user", "ana"),
        metadata={"n": [1, 2.5, {"deep": None}]},
        labels={"Topic": ["Travel"]},
        importance=0.2,
        ttl=3600,
    )
    updated = await memory.update(stored.id, text="Ana prefers aisle seats ✈")
    for record in (stored, updated):
        assert record_from_json(loads(dumps(record_to_json(record)))) == record
    hits = await memory.recall("aisle seats", scopes=[("acme", "user", "ana")])
    answer = loads(dumps(hits_to_json(hits)))
    assert list(answer) == ["status", "coverage", "mode", "selection_id", "error", "hits"]
    assert answer["hits"] == [loads(dumps(hit_to_json(hit))) for hit in hits]
    assert record_from_json(answer["hits"][0]["memory"]) == updated


def test_any_record_round_trips_property() -> None:
    """Any scope, text, JSON metadata, labels, importance in [0, 1], revision and
    millisecond times (in any UTC offset) survive record -> JSON text -> record."""
    hypothesis = pytest.importorskip("hypothesis")
    st = pytest.importorskip("hypothesis.strategies")
    words = st.text(min_size=1, max_size=8).filter(lambda t: "\x00" not in t)
    json_values = st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=8) | st.just([]) | st.just({}),
        # min_size=1: an extension always draws from ``inner`` (hypothesis warns, now and
        # then, of one that drew an empty list or dict as if it could not recurse)
        lambda inner: st.lists(inner, min_size=1, max_size=3)
        | st.dictionaries(words, inner, min_size=1, max_size=3),
        max_leaves=8,
    )  # fmt: skip
    parts = st.text(st.characters(categories=["L", "N"]), min_size=1, max_size=8)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    times = st.builds(
        lambda ms, hours: (epoch + timedelta(milliseconds=ms)).astimezone(
            timezone(timedelta(hours=hours))
        ),
        st.integers(0, 4_102_444_800_000),
        st.integers(-12, 14),
    )

    @hypothesis.settings(max_examples=150, deadline=None)
    @hypothesis.given(
        st.lists(parts, min_size=1, max_size=4),
        st.text(max_size=40),
        st.dictionaries(words, json_values, max_size=4),
        st.dictionaries(words, st.lists(words, max_size=3), max_size=3),
        st.floats(0, 1),
        st.integers(1, 10**6),
        times,
        st.none() | times,
    )
    def check(
        scope: list[str],
        text: str,
        metadata: dict[str, Any],
        labels: dict[str, list[str]],
        importance: float,
        revision: int,
        created: datetime,
        expires: datetime | None,
    ) -> None:
        record = MemoryRecord(
            "01KDVDNGTR7ECJACDR43KZ4YPR", tuple(scope), text, metadata, labels, importance,
            created, created, expires, revision, content_sha256(text),
        )  # fmt: skip
        assert record_from_json(loads(dumps(record_to_json(record)))) == record

    check()


def test_times_are_utc_with_milliseconds_and_z() -> None:
    moment = datetime(2026, 3, 4, 5, 6, 7, 891999, tzinfo=timezone(timedelta(hours=-5)))
    assert format_time(moment) == "2026-03-04T10:06:07.891Z"  # truncated to the ms
    assert format_time(None) is None
    with pytest.raises(ValidationError, match=r"created_at .* has no timezone"):
        format_time(datetime(2026, 1, 1), "created_at")


def test_non_finite_scores_are_null_and_other_non_finite_numbers_refused() -> None:
    """A score that is not finite is null (JSON has no NaN); a non-finite importance or
    metadata value is refused, and so is NaN or Infinity in JSON text read back."""
    record = golden_record()
    hit = golden_hit(record)
    odd = Hit(
        record, math.inf, math.nan, None, None, -math.inf, hit.evidence, {}, retention=math.nan
    )
    shaped = hit_to_json(odd)
    assert (shaped["score"], shaped["similarity"], shaped["bm25"], shaped["retention"]) == (
        None,
        None,
        None,
        None,
    )
    with pytest.raises(ValidationError, match=r"importance .* finite"):
        record_to_json(MemoryRecord(**{**_fields(record), "importance": math.nan}))
    with pytest.raises(ValidationError, match="NaN or an infinity"):
        dumps(record_to_json(MemoryRecord(**{**_fields(record), "metadata": {"x": math.inf}})))
    for text in ('{"importance": NaN}', "[Infinity]", "-Infinity"):
        with pytest.raises(ValidationError, match="not a JSON number"):
            loads(text)


def _fields(record: MemoryRecord) -> dict[str, Any]:
    return {name: getattr(record, name) for name in RECORD_FIELDS}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"scope": "acme/user/sam"}, "'scope' is 'acme/user/sam'; it must be an array"),
        ({"scope": []}, "scope"),
        ({"id": ""}, "'id' is empty"),
        ({"text": 3}, "'text' is 3; it must be a string"),
        ({"metadata": None}, "'metadata' is None; it must be a JSON object"),
        ({"labels": {"topic": "travel"}}, "label 'topic' is 'travel'; each label is a list"),
        ({"importance": True}, "'importance' is True; it must be a number from 0 to 1"),
        ({"importance": 1.5}, "'importance' is 1.5; it must be a number from 0 to 1"),
        ({"importance": 10**400}, "'importance' is <an integer of about 401 digits>; it"),
        ({"importance": math.inf}, "'importance' is inf; it must be a number from 0 to 1"),
        ({"importance": math.nan}, "'importance' is nan; it must be a number from 0 to 1"),
        ({"revision": 0}, "revisions start at 1"),
        ({"revision": 2.0}, "'revision' is 2.0; it must be a whole number"),
        ({"created_at": "2026-12-01T23:52:52"}, "created_at='2026-12-01T23:52:52' must be"),
        ({"updated_at": "yesterday"}, "updated_at='yesterday' must be an RFC 3339 time"),
        ({"expires_at": 1767225600}, "expires_at=1767225600 must be an RFC 3339 time"),
        ({"content_sha256": "0" * 64}, "is not the SHA-256 of its text; leave content_sha256"),
        ({"utility": None}, "a record has no field 'utility'; its fields are id, scope"),
    ],
)
def test_record_from_json_names_the_field_and_the_fix(change: dict[str, Any], message: str) -> None:
    """Each wrong field is one ValidationError naming it and what to write."""
    obj = record_to_json(golden_record()) | change
    with pytest.raises(ValidationError) as raised:
        record_from_json(obj)
    assert message in str(raised.value)


def test_record_from_json_needs_every_field_but_the_hash() -> None:
    obj = record_to_json(golden_record())
    del obj["content_sha256"]
    assert record_from_json(obj).content_sha256 == SHA  # computed from the text
    del obj["expires_at"], obj["labels"]
    with pytest.raises(ValidationError, match="lacks 'labels', 'expires_at'"):
        record_from_json(obj)
    with pytest.raises(ValidationError, match="must be a JSON object"):
        record_from_json([obj])


@pytest.mark.parametrize(
    ("version", "message"),
    [
        (2, "written by a newer engramdb: upgrade engramdb"),
        ("1", 'write "format": 1'),
        (True, 'write "format": 1'),
    ],
)
def test_an_export_line_of_another_format_is_refused(version: object, message: str) -> None:
    line = export_to_json(golden_record()) | {"format": version}
    with pytest.raises(ValidationError, match=message):
        export_from_json(line)


def test_an_export_vector_needs_its_space_and_base64() -> None:
    line = export_to_json(golden_record(), ("hash/bow@4", VECTOR))
    with pytest.raises(ValidationError, match="needs both 'space_id'"):
        export_from_json({k: v for k, v in line.items() if k != "space_id"})
    with pytest.raises(ValidationError, match="not base64"):
        export_from_json(line | {"vector": "not base64!"})
    assert export_from_json(export_to_json(golden_record())) == (golden_record(), None)


def test_dumps_line_escapes_every_line_separator_json_may_hold_raw() -> None:
    """U+2028, U+2029 and U+0085 come out as ``\\u`` escapes (in keys too), so the line
    survives any splitter; the value read back is the same."""
    value = {"text": "a\u2028b\u2029c\x85d\ne\rf", "k\u2028": ["\x85"]}
    line = dumps_line(value)
    assert line.splitlines() == [line] and "\n" not in line
    assert "\\u2028" in line and "\\u2029" in line and "\\u0085" in line
    assert loads_line(line) == loads(line) == value
    assert dumps_line({"text": TEXT}) == dumps({"text": TEXT})  # nothing else changes


def test_dumps_line_writes_no_character_a_terminal_acts_on() -> None:
    """DEL, every C1 control (U+009B is a terminal's CSI, U+009D its OSC) and the bidi
    embeddings, overrides and isolates come out as ``\\u`` escapes, as JSON writes the
    C0 controls (ESC, BEL): a line printed to a terminal drives nothing, and reads back
    the same; printable text (accents, joiners, bidi marks) stays as it is."""
    hostile = (
        "\x1b]0;t\x07 \x7f" + "".join(map(chr, range(0x80, 0xA0))) + "\u202a\u202e\u2066\u2069"
    )
    value = {"text": hostile + " é \u200d \u200f", "k\u202e": ["\x9b"]}
    line = dumps_line(value)
    assert not set(line) & (set(hostile) - set("]0;t ")) and " é \u200d \u200f" in line
    assert "\\u009b" in line and "\\u202e" in line and "\\u001b" in line
    assert loads_line(line) == value


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"a": ' + "[" * 65 + "]" * 65 + "}", "nested deeper than 64 levels"),
        ('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested deeper than 64 levels"),
        ('{"a": ' + "9" * 5000 + "}", "the number 999999999999…(5000 characters) is out of range"),
        ('{"a": 9223372036854775808}', "the number 9223372036854775808 is out of range"),
        ('{"a": -9223372036854775809}', "the number -9223372036854775809 is out of range"),
        ('{"a": NaN}', "NaN is not a JSON number"),
        ('{"a": -Infinity}', "-Infinity is not a JSON number"),
        ("{not json}", "not JSON (Expecting property name"),
    ],
)
def test_loads_line_refuses_a_hostile_line_with_a_validation_error(text: str, problem: str) -> None:
    with pytest.raises(ValidationError) as caught:
        loads_line(text)
    assert str(caught.value).startswith(problem)


def test_loads_line_reads_64_bit_integers_and_brackets_inside_strings() -> None:
    assert loads_line('{"a": [9223372036854775807, -9223372036854775808, 1e308]}') == {
        "a": [2**63 - 1, -(2**63), 1e308]
    }
    assert loads_line('{"a": "' + "[" * 1000 + '\\"["}') == {"a": "[" * 1000 + '"['}
    assert loads_line("[" * 64 + "]" * 64) is not None


def test_the_golden_hit_reads_back_to_the_same_json() -> None:
    """A client reads a hit back from its JSON: the same record, scores, ranks and
    evidence (times at milliseconds, as written); a ``null`` boost is NaN again."""
    line = GOLDEN.read_text(encoding="utf-8").splitlines()[1]
    hit = hit_from_json(loads(line))
    assert dumps(hit_to_json(hit)) == line
    assert hit.memory == record_from_json(loads(line)["memory"])
    assert (hit.vector_rank, hit.lexical_rank, hit.bm25) == (1, 2, 1.5)
    assert math.isnan(hit.boosts["utility"]) and hit.boosts["recency"] == 0.9
    assert hit.evidence["embedded_at"] == datetime(2026, 12, 1, 23, 52, 52, 124000, tzinfo=UTC)


def test_a_recall_reads_back_from_its_json() -> None:
    """``hits_from_json(hits_to_json(hits))`` is the same recall: status, mode,
    selection id, coverage and every hit."""
    memory = Memory(InMemoryStore(), HashEmbedder())
    memory.remember("Sam drinks green tea", ("sam",))
    memory.remember("tea with lemon", ("sam",))
    hits = memory.recall("tea", scopes=[("sam",)])
    back = hits_from_json(loads(dumps(hits_to_json(hits))))
    assert isinstance(back, Hits) and len(back) == len(hits) == 2
    assert (back.status, back.mode, back.selection_id, back.coverage) == (
        hits.status,
        hits.mode,
        hits.selection_id,
        hits.coverage,
    )
    assert [h.memory for h in back] == [h.memory for h in hits]
    assert hits_to_json(back) == hits_to_json(hits)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"status": "fine"}, "status 'fine' is not one of"),
        ({"mode": "fuzzy"}, "mode 'fuzzy' is not one of"),
        ({"extra": 1}, "it must have exactly status"),
        ({"hits": {}}, "hits are {}; they must be an array"),
        ({"selection_id": 7}, "a recall's answer's 'selection_id' is 7"),
    ],
)
def test_hits_from_json_names_what_is_wrong(change: dict[str, Any], message: str) -> None:
    answer = {
        "status": "used",
        "coverage": 1.0,
        "mode": "hybrid",
        "selection_id": "sel",
        "error": None,
        "hits": [],
        **change,
    }
    with pytest.raises(ValidationError, match=re.escape(message)):
        hits_from_json(answer)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"vector_rank": 0}, "'vector_rank' is 0; it must be a rank from 1 or null"),
        ({"score": "high"}, "a hit's 'score' is 'high'; it must be a number or null"),
        ({"evidence": {"id": "x"}}, "a hit's evidence is"),
        ({"boosts": []}, "a hit's boosts are []"),
    ],
)
def test_hit_from_json_names_what_is_wrong(change: dict[str, Any], message: str) -> None:
    hit = {**loads(GOLDEN.read_text(encoding="utf-8").splitlines()[1]), **change}
    with pytest.raises(ValidationError, match=re.escape(message)):
        hit_from_json(hit)


@pytest.mark.parametrize("value", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_a_time_outside_the_years_1_to_9999_in_utc_is_a_validation_error(value: str) -> None:
    """A time whose offset moves it before the year 1 or after 9999 in UTC is refused
    with the bounds named (it raised a raw OverflowError: a client reading an answer,
    a restore reading a backup line)."""
    with pytest.raises(ValidationError, match="outside the years 1 to 9999"):
        parse_time(value, "created_at")
