"""A small LoCoMo-format dataset made up here, for the smoke check when the development
split is not on the machine (``eval.smoke``) and for the harness's tests.

Two people talk over a few sessions; some turns state a fact (a pet's name, a trip, a
hobby, a meal), the others are small talk. Each fact gets a question naming the person
and the fact's subject, with the fact's turn as evidence (category 4), and a question
about its date (category 2); a few questions have malformed or dangling evidence ids
(one names no turn at all), and one adversarial question (category 5) asks about a
fact nobody stated.
"""

from __future__ import annotations

import random
from typing import Any

__all__ = ["conversations"]

_FACTS = [
    ("adopted a {adj} dog named {name}", "What is the name of {who}'s dog?"),
    ("went hiking near {place} with my cousin", "Where did {who} go hiking?"),
    ("started learning the {instrument} this month", "Which instrument is {who} learning?"),
    ("cooked {dish} for the whole family", "What did {who} cook for the family?"),
    ("finished reading a novel about {topic}", "What was the novel {who} read about?"),
    ("volunteered at the {venue} on the weekend", "Where did {who} volunteer?"),
]
_FILL = {
    "adj": ["small", "shaggy", "lively", "old"],
    "name": ["Rex", "Biscuit", "Luna", "Pepper", "Ziggy"],
    "place": ["the lake", "Mount Rainier", "the coast", "the canyon"],
    "instrument": ["cello", "violin", "ukulele", "trumpet"],
    "dish": ["lasagna", "paella", "curry", "dumplings"],
    "topic": ["sailors", "a lighthouse", "time travel", "a chess prodigy"],
    "venue": ["animal shelter", "food bank", "library", "community garden"],
}
_SMALL_TALK = [
    "Hey, how have you been lately?",
    "That sounds great, tell me more!",
    "Haha, I know what you mean.",
    "Work has been busy but I am fine.",
    "Thanks for asking, it means a lot.",
    "Let's catch up again soon!",
]
_MONTHS = ["January", "March", "May", "July", "September", "November"]


def conversations(count: int = 3, seed: int = 7) -> list[dict[str, Any]]:
    """``count`` samples in the format of LoCoMo's ``locomo10.json``."""
    rng = random.Random(seed)
    samples = []
    for number in range(count):
        people = rng.sample(["Ana", "Ben", "Cleo", "Dev", "Eli", "Fay"], 2)
        talk: dict[str, Any] = {"speaker_a": people[0], "speaker_b": people[1]}
        qa: list[dict[str, Any]] = []
        for session in range(1, 5):
            clock = f"{rng.randint(1, 11)}:{rng.randint(10, 59)} am"
            date = f"{clock} on {rng.randint(1, 28)} {_MONTHS[session]}, 2023"
            talk[f"session_{session}_date_time"] = date
            turns = []
            for turn in range(1, 9):
                who = people[turn % 2]
                dia_id = f"D{session}:{turn}"
                entry: dict[str, Any] = {"speaker": who, "dia_id": dia_id}
                if turn in (3, 6):
                    statement, question = rng.choice(_FACTS)
                    fill = {key: rng.choice(values) for key, values in _FILL.items()}
                    entry["text"] = "Guess what, I " + statement.format(**fill) + "!"
                    qa.append(
                        {"question": question.format(who=who), "evidence": [dia_id], "category": 4}
                    )
                    qa.append({
                        "question": f"When did {who} mention that they {statement.format(**fill)}?",
                        "evidence": [dia_id if turn == 3 else f"D:{session}:0{turn}"],
                        "category": 2,
                    })  # fmt: skip
                else:
                    entry["text"] = rng.choice(_SMALL_TALK)
                if turn == 8:
                    entry["blip_caption"] = "a photo of a sunset over the water"
                turns.append(entry)
            talk[f"session_{session}"] = turns
        qa.append({"question": "What is the dragon called?", "evidence": ["D1:1"], "category": 5})
        qa.append({"question": "What did the robot say?", "evidence": ["D99:1"], "category": 4})
        qa.append({"question": "Who likes sunsets?", "evidence": ["D1:8; D2:8"], "category": 1})
        samples.append({"sample_id": f"synthetic-{number}", "conversation": talk, "qa": qa})
    return samples
