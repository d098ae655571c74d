"""Lexical search: a tokenizer and stemmer that agree with SQLite FTS5, BM25, and the
query's ceiling.
"""
