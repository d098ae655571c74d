"""Retrieval-quality evaluation of engramdb (not part of the wheel); see docs/quality.md."""
