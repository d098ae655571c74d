"""Refine a static table on questions: listwise distillation of the teacher's rankings.

``eval/distill_static.py`` fits a table to the teacher's vectors of chat lines; this step
takes such a table and teaches it to *rank* as the teacher ranks, on question -> fact
pairs mined with the teacher from text that is neither LoCoMo nor the probes::

    PYTHONPATH=core:drivers .venv/bin/python -m eval.distill_qa \\
        --base BASE.bin --out T.bin [--steps 1500] [--prior 0.01] ...

(``BASE.bin`` is a table from ``eval.distill_static``; the script reads its effective
token vectors, weight x scale x row, trains them, and writes a table of the same format,
vocabulary and weights.)

The data, all from the first 100,000 messages of ``chitchat-dataset`` 0.9.0 (MIT) that
``eval.distill_static`` fits on, and the teacher's vectors of them (cached there):

1. **chat questions -> chat statements**: every message with a question mark, its 16
   nearest statements by the teacher and 16 random ones as candidates.
2. **named facts and questions** (synthetic "worlds", made here, seeded): a world is 12
   people with distinct first names (Faker's en_US lists, MIT), each with 12 facts: a
   first-person chat statement ("I grew up in Ohio and moved here for school") put in the
   third person with the name ("Dana grew up in Ohio and moved here for school"); the
   question of a fact is the chat question ("Where are you from?") the teacher finds
   nearest to the original statement, put in the third person with the same name
   ("Where is Dana from?"), and a second copy with the pronoun ("Where is she from?").
   A *restatement* of a fact is the chat statement the teacher finds nearest to the
   original (0.6-0.95 cosine), with the same name. Queries: the named questions over all
   144 facts of the world (pooled) and over the person's 12 (scoped), the pronoun
   questions over the person's 12, the restatements over the world's 144.
3. **geometry**: random chat messages, the student's cosine matrix against the
   teacher's.

With ``--disjoint`` a fact is used only if it shares no content word with its question
(terms of engramdb's lexical leg, stop words left out), and a restatement only if it
shares none with its fact: pairs that only meaning can match.

The loss: for every query, the KL divergence from the teacher's softmax over its
candidates (cosines / ``--teacher-temp``) to the student's (cosines / the student's
temperature: ``--student-temp``, learnt from there with ``--learn-temp``); the geometry
term's squared error x ``--geometry``; and a ridge ``--prior`` x sum over tokens of
||E - E0||^2 toward the base table's vectors E0 (scaled to a median norm of 1), so that
every token the data lacks keeps its vector. Adam (``--lr``), fixed seed, one thread.
Tokens with weight 0 stay 0. The labels are the teacher's: nothing here is hand-labelled,
and no text of LoCoMo or of ``eval/probe_*`` is used.

``--rare-scale S`` first multiplies every token's vector by 1 + (S - 1) K / (K + c), c its
count in the corpus (``--rare-k`` K): tokens the chat corpus rarely or never has, names
mostly, count for more in a text's weighted mean (the shipped table gives a name too
little of a sentence: in a pool of many people's facts the question's name is what tells
them apart). ``--steps 0`` writes just that. ``--save-every N`` also writes
``OUT-N.bin`` every N steps.
"""

from __future__ import annotations

import argparse
import random
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engramdb._embedders.static_embedder import build_static_table
from engramdb._embedders.wordpiece import WordPieceTokenizer

from .distill_static import ROOT, corpus_sentence_targets, corpus_sentences, teacher

MESSAGES = 100_000

_Q_SUBJECT = {
    "do you": "does {n}",
    "are you": "is {n}",
    "have you": "has {n}",
    "were you": "was {n}",
    "you're": "{n} is",
    "you've": "{n} has",
    "you'll": "{n} will",
    "you'd": "{n} would",
    "you are": "{n} is",
    "you have": "{n} has",
    "you were": "{n} was",
    "you do": "{n} does",
}
_S_SUBJECT = {
    "i'm": "{n} is",
    "im": "{n} is",
    "i am": "{n} is",
    "i've": "{n} has",
    "i have": "{n} has",
    "i'd": "{n} would",
    "i'll": "{n} will",
    "i was": "{n} was",
    "i do": "{n} does",
}
_Q_PATTERN = re.compile(
    r"\b("
    + "|".join(map(re.escape, sorted(_Q_SUBJECT, key=len, reverse=True)))
    + r"|yourself|yours|your|you)\b",
    re.IGNORECASE,
)
_S_PATTERN = re.compile(
    r"\b("
    + "|".join(map(re.escape, sorted(_S_SUBJECT, key=len, reverse=True)))
    + r"|myself|mine|my|me|i)\b",
    re.IGNORECASE,
)
_PRONOUNS = {
    "he": {"subj": "he", "obj": "him", "poss": "his", "self": "himself", "own": "his"},
    "she": {"subj": "she", "obj": "her", "poss": "her", "self": "herself", "own": "hers"},
}


def third_person(text: str, name: str, pronoun: str, question: bool, use_name: bool) -> str:
    """``text`` about "you" (question) or "I" (statement) made about ``name``: the first
    mention by name (or the pronoun when ``use_name`` is false), later ones by pronoun."""
    forms = _PRONOUNS[pronoun]
    table = _Q_SUBJECT if question else _S_SUBJECT
    named = [not use_name]

    def subject() -> str:
        if named[0]:
            return forms["subj"]
        named[0] = True
        return name

    def replace(match: re.Match[str]) -> str:
        word = match.group(1).lower()
        if word in table:
            return table[word].format(n=subject())
        if word in ("yourself", "myself"):
            return forms["self"]
        if word in ("yours", "mine"):
            return forms["own"]
        if word in ("your", "my"):
            if named[0]:
                return forms["poss"]
            named[0] = True
            return f"{name}'s"
        if word == "me" or (question and word == "you" and match.start() > 0 and named[0]):
            return forms["obj"]
        return subject()

    out = (_Q_PATTERN if question else _S_PATTERN).sub(replace, text)
    return out[0].upper() + out[1:]


def _is_question(text: str) -> bool:
    return text.rstrip().endswith("?")


def mine(seed: int, worlds: int, disjoint: bool = False) -> dict[str, Any]:
    """The training data (see the module docstring), with the teacher's vectors of every
    text in ``texts``."""
    import numpy as np
    from faker.providers.person.en_US import Provider

    messages = corpus_sentences(MESSAGES)
    targets = corpus_sentence_targets(
        ROOT / f".cache/distill-minilm-chitchat-targets-{MESSAGES}.npy", MESSAGES
    )
    rng = random.Random(seed)
    seen: set[str] = set()
    unique = []
    for i, text in enumerate(messages):
        key = text.lower()
        if key not in seen:
            seen.add(key)
            unique.append(i)
    questions = [i for i in unique if _is_question(messages[i]) and len(messages[i].split()) >= 3]
    statements = [
        i for i in unique if not _is_question(messages[i]) and 4 <= len(messages[i].split()) <= 30
    ]
    first_person = [
        i
        for i in statements
        if re.search(r"\b(i|my|i'm|im)\b", messages[i], re.IGNORECASE)
        and not re.search(r"\b(you|your|you're)\b", messages[i], re.IGNORECASE)
    ]
    you_questions = [
        i
        for i in questions
        if re.search(r"\b(you|your)\b", messages[i], re.IGNORECASE)
        and not re.search(r"\b(i|my|me|i'm)\b", messages[i], re.IGNORECASE)
        and len(messages[i].split()) <= 16
    ]
    t = np.asarray(targets, dtype=np.float32)
    # 1. chat questions -> their 16 nearest statements (+ 16 random at training time)
    st = t[statements]
    chat_q = rng.sample(questions, min(len(questions), 12000))
    chat_top = []
    for b in range(0, len(chat_q), 2048):
        sims = t[chat_q[b : b + 2048]] @ st.T
        chat_top.append(np.argsort(-sims, axis=1)[:, :16])
    chat_cands = [[statements[j] for j in row] for row in np.concatenate(chat_top)]
    # 2. named worlds: each fact's nearest "you" question and nearest restatement
    fp = t[first_person]
    yq = t[you_questions]
    best_q, best_q_sim, best_r, best_r_sim = [], [], [], []
    for b in range(0, len(first_person), 2048):
        sims = fp[b : b + 2048] @ yq.T
        best_q.append(sims.argmax(axis=1))
        best_q_sim.append(sims.max(axis=1))
        sims = fp[b : b + 2048] @ fp.T
        sims[sims > 0.95] = -1.0  # itself, and copies
        best_r.append(sims.argmax(axis=1))
        best_r_sim.append(sims.max(axis=1))
    bq, bqs = np.concatenate(best_q), np.concatenate(best_q_sim)
    br, brs = np.concatenate(best_r), np.concatenate(best_r_sim)
    usable = [k for k in range(len(first_person)) if bqs[k] >= 0.5]
    if disjoint:
        # only pairs that share no content word (stemmed as the lexical leg stems them):
        # the question must be matched by meaning, not by a repeated word
        from engramdb._lexical.bm25 import STOP_WORDS, terms

        def content(text: str) -> set[str]:
            return {t for t in terms(text) if t not in STOP_WORDS}

        usable = [
            k
            for k in usable
            if not content(messages[first_person[k]]) & content(messages[you_questions[bq[k]]])
        ]
        fact_terms = {k: content(messages[first_person[k]]) for k in usable}
        brs = np.where(
            [
                bool(fact_terms.get(k, set()) & content(messages[first_person[br[k]]]))
                for k in range(len(first_person))
            ],
            0.0,
            brs,
        )
    rng.shuffle(usable)
    names = [(n, "he") for n in Provider.first_names_male] + [
        (n, "she") for n in Provider.first_names_female
    ]
    names = sorted(set(names))
    texts: list[str] = []
    index: dict[str, int] = {}

    def add(text: str) -> int:
        if text not in index:
            index[text] = len(texts)
            texts.append(text)
        return index[text]

    world_facts, named_q, pronoun_q, restated = [], [], [], []
    at = 0
    for w in range(worlds):
        people = rng.sample(names, 12)
        facts = []
        for p, (name, pronoun) in enumerate(people):
            for _ in range(12):
                k = usable[at % len(usable)]
                at += 1
                fact = add(third_person(messages[first_person[k]], name, pronoun, False, True))
                facts.append(fact)
                q = messages[you_questions[bq[k]]]
                named_q.append(
                    (add(third_person(q, name, pronoun, True, True)), w, p, len(facts) - 1)
                )
                pronoun_q.append(
                    (add(third_person(q, name, pronoun, True, False)), w, p, len(facts) - 1)
                )
                if brs[k] >= 0.6:
                    r = messages[first_person[br[k]]]
                    restated.append(
                        (add(third_person(r, name, pronoun, False, True)), w, p, len(facts) - 1)
                    )
        world_facts.append(facts)
    print(
        f"mined: {len(chat_q)} chat questions, {len(statements)} statements, "
        f"{len(usable)} usable facts, {worlds} worlds, {len(named_q)} named questions, "
        f"{len(restated)} restatements, {len(texts)} new texts"
    )
    return {
        "messages": messages,
        "targets": t,
        "chat_q": chat_q,
        "chat_cands": chat_cands,
        "statements": statements,
        "texts": texts,
        "world_facts": world_facts,
        "named_q": named_q,
        "pronoun_q": pronoun_q,
        "restated": restated,
    }


def teacher_vectors(texts: Sequence[str], cache: Path) -> Any:
    """The teacher's normalised vectors of ``texts`` (cached by the texts' hash)."""
    import hashlib

    import numpy as np

    key = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
    path = cache.with_name(f"{cache.stem}-{key}.npy")
    if path.exists():
        return np.load(path)
    model = teacher()
    model.max_seq_length = 64
    out = np.asarray(
        model.encode(list(texts), batch_size=128, normalize_embeddings=True), dtype=np.float32
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, out)
    return out


def read_table(data: bytes) -> tuple[list[str], Any, Any]:
    """(vocabulary, weights, effective vectors weight x scale x row) of a table's bytes."""
    import struct

    import numpy as np

    _, _, _, _, n, dims, vocab_len = struct.unpack_from("<8sHBBIII", data)
    at = 24
    vocabulary = data[at : at + vocab_len].decode("utf-8").split("\n")
    at += vocab_len
    weights = np.frombuffer(data, dtype="<f4", count=n, offset=at).astype(np.float64)
    scales = np.frombuffer(data, dtype="<f4", count=n, offset=at + 4 * n).astype(np.float64)
    rows = np.frombuffer(data, dtype=np.int8, count=n * dims, offset=at + 8 * n)
    rows = rows.reshape(n, dims).astype(np.float64)
    return vocabulary, weights, rows * (weights * scales)[:, None]


def train(args: argparse.Namespace) -> int:
    import numpy as np
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    vocabulary, weights, e0 = read_table(args.base.read_bytes())
    norm = float(np.median(np.linalg.norm(e0[weights > 0], axis=1)))
    e0 = e0 / norm
    data = mine(args.seed, args.worlds, args.disjoint)
    tokenizer = WordPieceTokenizer(vocabulary)
    messages, texts = data["messages"], data["texts"]
    tv_new = teacher_vectors(texts, ROOT / ".cache/distill-qa-teacher.npy")
    tv_msg = data["targets"]
    ids_msg: dict[int, list[int]] = {}

    def msg_ids(i: int) -> list[int]:
        if i not in ids_msg:
            ids_msg[i] = tokenizer.ids(messages[i])
        return ids_msg[i]

    ids_new = [tokenizer.ids(t) for t in texts]
    if args.rare_scale != 1.0:
        # rare tokens (names, mostly) count for more: a token seen c times in the corpus
        # is multiplied by 1 + (rare_scale - 1) * K / (K + c), before training and prior
        counts = np.zeros(len(vocabulary), dtype=np.float64)
        for text in messages:
            np.add.at(counts, tokenizer.ids(text), 1)
        k = args.rare_k
        e0 = e0 * (1.0 + (args.rare_scale - 1.0) * k / (k + counts))[:, None]
    active = torch.tensor(weights > 0, dtype=torch.float32)[:, None]
    base = torch.tensor(e0, dtype=torch.float32)
    table = torch.nn.Parameter(base.clone())
    # the student's temperature: fixed, or learnt (a static table's cosines have a scale
    # of their own, so matching the teacher's softmax at the teacher's temperature would
    # also force the teacher's spread of cosines onto it)
    log_temp = torch.nn.Parameter(torch.tensor(float(np.log(args.student_temp))))
    params = [table, log_temp] if args.learn_temp else [table]
    opt = torch.optim.Adam(params, lr=args.lr)

    def embed(id_lists: Sequence[Sequence[int]]) -> Any:
        flat = [i for ids in id_lists for i in ids] or [0]
        offsets, at = [], 0
        for ids in id_lists:
            offsets.append(at)
            at += len(ids)
        out = F.embedding_bag(torch.tensor(flat), table * active, torch.tensor(offsets), mode="sum")
        return F.normalize(out, dim=-1, eps=1e-8)

    def kl(student: Any, teacher: Any) -> Any:
        p = F.softmax(teacher / args.teacher_temp, dim=-1)
        logq = F.log_softmax(student / log_temp.exp(), dim=-1)
        return (p * (torch.log(p + 1e-12) - logq)).sum(dim=-1).mean()

    def write(path: Path) -> None:
        vectors = (table * active).detach().numpy().astype(np.float64) * norm
        safe = np.where(weights > 0, weights, 1.0)
        rows = vectors / safe[:, None]
        data_out = build_static_table(vocabulary, weights.tolist(), rows.tolist())
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data_out)
        print(f"wrote {path}: {len(data_out):,} bytes", flush=True)

    rng = random.Random(args.seed)
    statements = data["statements"]
    world_facts = data["world_facts"]
    started = time.perf_counter()
    for step in range(args.steps):
        losses = {}
        # 1. chat questions
        picks = rng.sample(range(len(data["chat_q"])), args.batch)
        cands = [data["chat_cands"][k] + rng.sample(statements, 16) for k in picks]
        q = embed([msg_ids(data["chat_q"][k]) for k in picks])
        c = embed([msg_ids(i) for row in cands for i in row]).view(args.batch, 32, -1)
        tq = torch.tensor(tv_msg[[data["chat_q"][k] for k in picks]])
        tc = torch.tensor(tv_msg[[i for row in cands for i in row]]).view(args.batch, 32, -1)
        losses["chat"] = kl(torch.einsum("bd,bkd->bk", q, c), torch.einsum("bd,bkd->bk", tq, tc))
        # 2. named worlds
        w = rng.randrange(len(world_facts))
        facts = world_facts[w]
        f = embed([ids_new[i] for i in facts])
        tf = torch.tensor(tv_new[facts])
        named = [x for x in data["named_q"] if x[1] == w]
        pron = [x for x in data["pronoun_q"] if x[1] == w]
        rest = [x for x in data["restated"] if x[1] == w]
        for label, group in (("named", named), ("pronoun", pron), ("restated", rest)):
            if not group:
                continue
            qs = embed([ids_new[x[0]] for x in group])
            tqs = torch.tensor(tv_new[[x[0] for x in group]])
            s, t = qs @ f.T, tqs @ tf.T
            scoped_s = torch.stack([s[r, 12 * x[2] : 12 * x[2] + 12] for r, x in enumerate(group)])
            scoped_t = torch.stack([t[r, 12 * x[2] : 12 * x[2] + 12] for r, x in enumerate(group)])
            losses[label + "-scoped"] = kl(scoped_s, scoped_t)
            if label != "pronoun":
                losses[label + "-pooled"] = kl(s, t)
        # 3. geometry
        sample = rng.sample(range(len(messages)), 64)
        g = embed([msg_ids(i) for i in sample])
        tg = torch.tensor(tv_msg[sample])
        losses["geometry"] = ((g @ g.T - tg @ tg.T) ** 2).mean() * args.geometry
        losses["prior"] = ((table - base) ** 2 * active).sum() * args.prior
        loss = sum(losses.values())
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 100 == 0 or step == args.steps - 1:
            losses["temp"] = log_temp.exp().detach()
            shown = " ".join(f"{k} {float(v.detach()):.4f}" for k, v in losses.items())
            print(f"step {step} ({time.perf_counter() - started:.0f} s): {shown}", flush=True)
        if args.save_every and (step + 1) % args.save_every == 0 and step + 1 < args.steps:
            write(args.out.with_name(f"{args.out.stem}-{step + 1}{args.out.suffix}"))
    write(args.out)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--worlds", type=int, default=40)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--prior", type=float, default=1e-2)
    parser.add_argument("--geometry", type=float, default=1.0)
    parser.add_argument("--teacher-temp", type=float, default=0.05)
    parser.add_argument("--student-temp", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--learn-temp", action="store_true")
    parser.add_argument(
        "--disjoint", action="store_true", help="only pairs that share no content word"
    )
    parser.add_argument("--rare-scale", type=float, default=1.0)
    parser.add_argument("--rare-k", type=float, default=5.0)
    parser.add_argument(
        "--save-every", type=int, default=0, help="also write OUT-STEP.bin every this many steps"
    )
    return train(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
