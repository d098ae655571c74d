"""An item row decodes to the record it was written from, field by field."""

from __future__ import annotations

from datetime import UTC, datetime

from engramdb._base.types import MemoryRecord
from engramdb.store.rows import item_row, record_from


def test_a_row_decodes_to_the_record_it_was_written_from_every_field_distinct() -> None:
    # record_from builds the record positionally: every field holds a value no other
    # field could take, so a field read from the wrong column changes the record.
    record = MemoryRecord(
        id="01ID",
        scope=("team", "alpha"),
        text="the text",
        metadata={"source": "chat"},
        labels={"topic": ["x", "y"]},
        importance=0.25,
        created_at=datetime(2026, 1, 2, 3, 4, 5, 6000, tzinfo=UTC),
        updated_at=datetime(2026, 2, 3, 4, 5, 6, 7000, tzinfo=UTC),
        expires_at=datetime(2027, 3, 4, 5, 6, 7, 8000, tzinfo=UTC),
        revision=3,
        content_sha256="ab" * 32,
    )
    row = item_row(record)
    assert record_from(row) == record
    assert record_from(["pad", *row], offset=1) == record
    same_times = MemoryRecord(
        id="02ID",
        scope=("solo",),
        text="t",
        created_at=record.created_at,
        updated_at=record.created_at,
    )
    decoded = record_from(item_row(same_times))
    assert decoded == same_times
    assert decoded.expires_at is None
    assert (decoded.metadata, decoded.labels) == ({}, {})
