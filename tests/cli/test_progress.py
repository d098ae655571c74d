"""Progress without a terminal: plain lines on the stream, at most one a second."""

from __future__ import annotations

import io

import pytest

from engramdb.cli._progress import Progress


def test_plain_progress_shows_the_first_and_the_last_step_and_skips_the_rest() -> None:
    """Within a second only the first step and the final one are printed."""
    stream = io.StringIO()
    with Progress("import", 1000, stream=stream) as progress:
        for done in range(100, 1001, 100):
            progress(done, 1000)
    assert stream.getvalue().splitlines() == ["import: 100/1000 (10%)", "import: 1000/1000 (100%)"]


def test_an_unknown_total_is_shown_as_a_question_mark() -> None:
    stream = io.StringIO()
    with Progress("reindex", None, stream=stream) as progress:
        progress(64)
    assert stream.getvalue() == "reindex: 64/?\n"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_with_rich_it_draws_a_bar_instead_of_lines() -> None:
    """With the cli extra (rich) and a terminal, no plain line is written."""
    pytest.importorskip("rich")
    stream = Terminal()
    with Progress("import", 100, stream=stream) as progress:
        progress(100, 100)
    assert "100%" in stream.getvalue() and "import: 100/100" not in stream.getvalue()
