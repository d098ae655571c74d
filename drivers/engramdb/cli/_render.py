"""What the CLI prints: reports as JSON-ready dicts with stable keys (records and hits
are :mod:`engramdb.json_format`'s, like every face's), and short human-readable lines.

Nothing stored reaches the terminal as a control sequence. ``main`` runs every command
(but a server) inside :func:`escaped_output`: standard output and standard error become
an :class:`EscapingStream` (as colorama wraps them), which writes every character of
``CONTROLS`` as an escape (:func:`escape_controls`). Every printer of every command goes
through it, errors too, whatever it prints: texts, metadata, labels, scope parts, ids,
space ids, settings. The escapes are JSON's, so ``--json`` output passes through it
with the same value; ``--raw`` turns it off.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from typing import Any, TextIO, cast

from engramdb import Hit, Hits, MemoryRecord
from engramdb.documents import lines_of, span_of
from engramdb.json_format import dumps, format_time, hit_to_json
from engramdb.settings import format_scope

__all__ = [
    "CONTROLS",
    "EscapingStream",
    "escape_controls",
    "escaped_output",
    "human_record",
    "print_hits",
    "print_json",
    "report_dict",
    "unescaped",
    "unescaped_output",
]

CONTROLS = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
"""What the CLI never prints as it is: every C0 control but tab and line feed (ESC starts
a terminal's control sequences, BEL ends one, CR overwrites the line), DEL, every C1
control (U+0080 to U+009F: U+009B is CSI, U+009D OSC), the line and paragraph separators
U+2028 and U+2029, the bidirectional embeddings, overrides and isolates (U+202A to
U+202E, U+2066 to U+2069: they reorder how the text around them reads, "Trojan Source"),
and lone surrogates (no terminal can show one)."""

_ONE_LINE = re.compile(CONTROLS.pattern[:-1] + "\n]")  # and the line feed
_NAMED = {"\n": "\\n", "\r": "\\r"}


def escape_controls(text: str, *, line_breaks: bool = False) -> str:
    """``text`` with each character of ``CONTROLS`` written as JSON escapes it (``\\r``,
    else ``\\u`` and four hex digits: ESC is ``\\u001b``); with ``line_breaks``, a line
    feed too (as ``\\n``), for a text shown inside one line."""
    pattern = _ONE_LINE if line_breaks else CONTROLS
    if not pattern.search(text):
        return text
    return pattern.sub(lambda m: _NAMED.get(m[0]) or f"\\u{ord(m[0]):04x}", text)


class EscapingStream:
    """A text stream that writes to ``unescaped`` through :func:`escape_controls`; every
    other attribute (``flush``, ``isatty``, ``buffer`` ...) is the stream's own."""

    def __init__(self, unescaped: TextIO) -> None:
        self.unescaped = unescaped

    def write(self, text: str) -> int:
        self.unescaped.write(escape_controls(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.unescaped, name)


@contextmanager
def escaped_output(*, raw: bool) -> Iterator[None]:
    """Standard output and error as :class:`EscapingStream` for the block (``raw``: as
    they are)."""
    if raw:
        yield
        return
    out, err = EscapingStream(sys.stdout), EscapingStream(sys.stderr)
    with redirect_stdout(cast(TextIO, out)), redirect_stderr(cast(TextIO, err)):
        yield


def unescaped(stream: TextIO) -> TextIO:
    """The stream under an :class:`EscapingStream` (else ``stream``): for what draws on
    the terminal itself (a progress bar) or speaks a protocol (a server)."""
    return cast(TextIO, getattr(stream, "unescaped", stream))


@contextmanager
def unescaped_output() -> Iterator[None]:
    """Standard output and error as they were before :func:`escaped_output`, for the
    block: a server's protocol and logs are its own."""
    with redirect_stdout(unescaped(sys.stdout)), redirect_stderr(unescaped(sys.stderr)):
        yield


def report_dict(report: object) -> dict[str, Any]:
    """A dataclass report (``MemoryStatus``, ``MaintenanceReport``) as plain JSON values."""
    assert dataclasses.is_dataclass(report) and not isinstance(report, type)
    out: dict[str, Any] = {}
    for field in dataclasses.fields(report):
        value = getattr(report, field.name)
        if hasattr(value, "to_json"):  # a nested report (MaintenanceSnapshot)
            value = value.to_json()
        out[field.name] = list(value) if isinstance(value, tuple) else value
    return out


def human_record(record: MemoryRecord) -> str:
    lines = [f"{record.id}  [{format_scope(record.scope)}]  rev {record.revision}", record.text]
    extras: list[str] = []
    if record.metadata:
        extras.append(f"metadata {_compact(record.metadata)}")
    if record.labels:
        extras.append(f"labels {_compact(record.labels)}")
    extras.append(f"importance {record.importance:g}")
    extras.append(f"created {format_time(record.created_at)}")
    if record.expires_at is not None:
        extras.append(f"expires {format_time(record.expires_at)}")
    lines.append("  " + ", ".join(extras))
    return "\n".join(lines)


def _compact(value: Mapping[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def print_json(value: object) -> None:
    """One JSON value on one line, written by the codec (compact, UTF-8, no NaN)."""
    sys.stdout.write(dumps(value) + "\n")


def print_hits(
    hits: Hits, shown: list[Hit], *, as_json: bool, explain: bool, raw: bool = False
) -> None:
    """The ``shown`` hits of a recall (JSON Lines, or a numbered line each and with
    ``explain`` its ranks, similarity, bm25, each leg's share of the score, boosts and
    evidence), after one line on
    standard error when the recall's status is not ``used`` or it has an error (e.g.
    ``read-only: ...``). A hit's text keeps to its line: its line breaks are shown as
    ``\\n`` (unless ``raw``)."""
    if hits.status != "used" or hits.error is not None:
        coverage = "" if hits.coverage is None else f", coverage {hits.coverage:.0%}"
        error = "" if hits.error is None else f", {hits.error}"
        print(f"recall status: {hits.status}{coverage}{error}", file=sys.stderr)
    for rank, hit in enumerate(shown, 1):
        if as_json:
            print_json(hit_to_json(hit))
            continue
        text = hit.memory.text if raw else escape_controls(hit.memory.text, line_breaks=True)
        place = _place(hit.memory, raw)
        print(f"{rank}. {hit.score:.4f}  {text}  ({hit.memory.id}{place and ', ' + place})")
        for turn in hit.context:  # the turns around a turn of a conversation, in order
            said = turn.text if raw else escape_controls(turn.text, line_breaks=True)
            print(f"   | {said}  ({turn.id})")
        if explain:
            data = hit_to_json(hit)
            similarity = "-" if hit.similarity is None else f"{hit.similarity:.4f}"
            bm25 = "-" if hit.bm25 is None else f"{hit.bm25:.4g}"
            print(
                f"   vector rank {hit.vector_rank or '-'}, lexical rank "
                f"{hit.lexical_rank or '-'}, similarity {similarity}, bm25 {bm25}, "
                f"boosts {json.dumps(data['boosts'], sort_keys=True)}"
                + _shares(hit.evidence.get("vector_share"), hit.evidence.get("lexical_share"))
                + _reranked(hit.evidence.get("rerank_score"))
            )
            if place:
                meta = hit.memory.metadata
                chunk = meta.get("document_chunk")
                print(
                    f"   document: chunk {chunk + 1 if isinstance(chunk, int) else '?'} of "
                    f"{meta.get('document_chunks', '?')}, characters {meta['document_start']}-"
                    f"{meta['document_end']} of its source"
                )
            evidence = data["evidence"]
            print(
                f"   evidence: scope {format_scope(evidence['scope'])}, revision "
                f"{evidence['revision']}, space {evidence['space_id']}, embedded "
                f"{evidence['embedded_at']}, sha256 {evidence['content_sha256'][:16]}"
            )


def _place(record: MemoryRecord, raw: bool) -> str:
    """Where a document's chunk comes from, ``source:first-last`` (its lines; a chunk
    stored before lines were recorded: ``source`` and its characters); "" for a memory
    that is not a chunk."""
    span = span_of(record)
    if span is None:
        return ""
    source, start, end = span
    shown = source if raw else escape_controls(source, line_breaks=True)
    lines = lines_of(record)
    if lines is None:
        return f"{shown}, characters {start}-{end}"
    first, last = lines
    return f"{shown}:{first}" if first == last else f"{shown}:{first}-{last}"


def _shares(vector: float | None, lexical: float | None) -> str:
    """Each leg's part of a hybrid hit's score, when a leg scored it."""
    if vector is None and lexical is None:
        return ""
    shown = ["-" if share is None else f"{share:.4f}" for share in (vector, lexical)]
    return f", shares: vector {shown[0]}, lexical {shown[1]}"


def _reranked(score: float | None) -> str:
    return "" if score is None else f", rerank score {score:.4g}"
