"""Backup files written by hand for the tests: a header and item lines with the end
marker that counts them and holds their SHA-256 (docs/storage-format.md#backups), so a
test can change a line and still reach the checks of that line."""

from __future__ import annotations

import hashlib
import json


def backup_text(header: str, items: list[str], unreadable: tuple[str, ...] = ()) -> str:
    """The backup file of ``header`` and the item lines ``items``, end marker included."""
    digest = hashlib.sha256("".join(f"{line}\n" for line in (header, *items)).encode())
    end = {
        "kind": "engramdb-backup-end",
        "items": len(items),
        "unreadable": list(unreadable),
        "sha256": digest.hexdigest(),
    }
    return "\n".join([header, *items, json.dumps(end, separators=(",", ":"))]) + "\n"


def split_backup(text: str) -> tuple[str, list[str], str]:
    """A backup file's header, item lines and end marker."""
    header, *items, end = text.rstrip("\n").split("\n")
    return header, items, end
