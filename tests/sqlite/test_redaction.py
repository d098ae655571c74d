"""With redact=redact_secrets, no secret reaches the embedder or any byte of the
database file: not the text, not the metadata, not the full-text index, not a query."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engramdb import EmbeddingSpace, HashEmbedder, Memory, redact_secrets
from engramdb.sqlite import SqliteStore

SAM = ("acme", "user", "sam")
# Made up, and assembled here so that no file of the repository holds a string a secret
# scanner would flag.
SECRETS = [
    "sk-proj-" + "Ab3dEfGh1jKlMnOpQrStUvWxYz0123456789",
    "AKIA" + "IOSFODNN7" + "EXAMPLE",
    "wJalrXUtnFEMI/K7MDENG" + "/bPxRfiCYEXAMPLEKEY",
    "ghp_" + "Ab3dEfGh1jKlMnOpQrStUvWxYz0123456789",
    "hunter2-Secret",
    "sk_live_" + "Ab3dEfGh1jKlMnOpQrStUvWx",
    "AIza" + "SyAb3dEfGh1jKlMnOpQrStUvWxYz0123456",
    "correct horse battery staple",
    "glpat-" + "Ab3dEfGh1jKlMnOpQrSt",
]


class Recording:
    """A HashEmbedder that keeps every text it is asked to embed."""

    def __init__(self) -> None:
        self.inner = HashEmbedder()
        self.seen: list[str] = []

    @property
    def space(self) -> EmbeddingSpace:
        return self.inner.space

    max_batch = 256

    def embed(self, texts: list[str], kind: str = "document") -> Any:
        self.seen += texts
        return self.inner.embed(texts, kind)  # type: ignore[arg-type]

    async def aembed(self, texts: list[str], kind: str = "document") -> Any:
        return self.embed(texts, kind)


def test_no_secret_reaches_the_embedder_or_the_file(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    embedder = Recording()
    with Memory(SqliteStore(path), embedder, redact=redact_secrets) as memory:
        record = memory.remember(
            f"the deploy key is {SECRETS[0]}, aws {SECRETS[1]} aws_secret_access_key={SECRETS[2]}"
            f", stripe {SECRETS[5]}, gcp {SECRETS[6]}",
            SAM,
            metadata={
                "source": f"pasted {SECRETS[3]}",
                "urls": [f"https://u:{SECRETS[4]}@h"],
                "config": f'{{"password": "{SECRETS[7]}", "token": "{SECRETS[8]}"}}',
            },
        )
        memory.update(record.id, metadata={"note": f"rotated {SECRETS[0]}"})
        hits = memory.recall(f"which deploy key {SECRETS[0]}", scopes=[SAM])
        assert hits[0].memory.id == record.id
        assert "[REDACTED:openai_key]" in hits[0].memory.text
    seen = "\n".join(embedder.seen)
    files = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    for secret in SECRETS:
        assert secret not in seen
        assert secret.encode() not in files
    assert b"[REDACTED:openai_key]" in files  # the file was read, with the placeholders
