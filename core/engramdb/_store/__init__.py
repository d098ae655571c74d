"""The store protocol's core side: the ops (one dataclass each), the outcome every store
must reach, the state a batch resolves against, and ``InMemoryStore``.
"""
