"""Full backups of a store, and their restore: every live item exactly as it is.

:func:`backup` writes JSON Lines (``docs/storage-format.md#backups``): a header line

    {"format": 2, "kind": "engramdb-backup", "spaces": ["hash/bow@64", ...]}

naming every embedding space of the store, then one line per live item, scopes in scope
order and each scope's items as ``ListItems`` gives them (newest first)::

    {"record": {...}, "history": [{...}, ...], "utility": {...} | null,
     "vectors": [{"space_id": ..., "vector": "<base64>", "embedded_at": ...}, ...]}

and last an end marker::

    {"kind": "engramdb-backup-end", "items": 1234, "unreadable": [], "sha256": "<hex>"}

``record`` and each earlier revision of ``history`` (newest first) are
:func:`engramdb.json_format.record_to_json`'s objects; ``utility`` is the item's policy
evidence (``GetUtility``), ``vectors`` its vector in each space (the base64 of the stored
float32 bytes, spaces in id order). The end marker counts the item lines, names the
memories whose stored row could not be read (left out, and reported), and holds the
SHA-256 of every line before it (each line's UTF-8 and a ``\\n``), so a file cut short
or changed is refused. Every line is written by :func:`~engramdb.json_format.dumps_line`
and the file is split on ``\\n`` only, so any text survives. The file depends only on
the data: backing up a restored store gives the same bytes.

**Online.** A backup may be taken while others write. Each page of items is read in one
store batch (one snapshot: a SQLite read transaction, PostgreSQL's REPEATABLE READ): the
records as they are in it, with their histories, evidence and vectors, so every line is
one item as it was at one moment, and a restore of any backup succeeds. Items written
after a page was read are in the next backup.

:func:`restore` reads a whole backup and checks every line (:func:`read_backup`: the
shape, then every record, earlier revision and evidence against the checks a write
makes, ``engramdb.validate.Validator``) and every id against the target before it
writes anything: with ``on_conflict="refuse"`` (the default) a target that holds any
of the ids (a live item) refuses the restore with ONE :class:`ConflictError` naming the
first few; ``"skip"`` leaves those items as the target has them, ``"replace"`` deletes
them and restores the backup's. An id the target holds in another scope than the
backup's is a conflict whatever ``on_conflict`` says: it is never deleted. Then it
writes everything in ONE atomic batch (``RestoreItem`` and ``PutVector``): all or
nothing. ``batch_size=N`` writes N items per batch instead, for a backup too large for
one transaction: a restore that fails partway then keeps the batches before, and running
it again with ``on_conflict="skip"`` finishes it.

**Vectors are trusted only where they were made.** A vector from a file could be
anything, and a store shares one vector per text among its scopes, so a restore stores
a backup's vectors only when it can tell they belong to their texts: with ``embedder``,
the vectors of its space are checked by embedding their texts again (a vector whose
cosine to the text's is below :data:`~engramdb.vector_check.TOLERANCE` refuses the whole
file; the fresh vector is the one stored, with the file's bytes and time only where
they are the same) and the other spaces' are left out; without it every vector is left
out; ``trust_vectors=True`` stores them as they are, for a backup you made yourself.
Items whose vector was left out are pending: maintenance or ``reindex`` embeds them.

Both work on any sync store: the reads and writes are store ops (``ListScopes``,
``ListItems``, ``GetItems``, ``History``, ``GetUtility``, ``GetVectors``,
``UnreadableItems``; ``RestoreItem``, ``PutVector``), so SQLite, PostgreSQL and your own
store back up and restore alike. A target without ``supports_policy`` keeps no
evidence: the restore leaves it out and counts it in ``RestoreReport.evidence_dropped``.
Receipts of recalls not yet evaluated are short-lived and are not backed up.
"""

from __future__ import annotations

from ._format import (
    END_KIND,
    FORMAT,
    KIND,
    Backup,
    BackupItem,
    BackupReport,
    RestoreReport,
    utility_from_json,
    utility_to_json,
)
from ._restore import read_backup, restore
from ._write import backup, backup_records

__all__ = [
    "END_KIND",
    "FORMAT",
    "KIND",
    "Backup",
    "BackupItem",
    "BackupReport",
    "RestoreReport",
    "backup",
    "backup_records",
    "read_backup",
    "restore",
    "utility_from_json",
    "utility_to_json",
]
