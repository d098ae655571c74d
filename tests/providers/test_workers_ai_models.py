"""One Workers AI model table: the REST embedder and the Worker's binding embedder read
the same core table, so they name the same space and cut texts the same way."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import httpx
import pytest
from provider_fakes import FAKE_KEY, no_network

from engramdb._embedders.workers_ai_models import DEFAULT_MODEL, MAX_BATCH, MODELS
from engramdb.providers import CloudflareEmbedder

REPO = Path(__file__).resolve().parents[2]
CLOUDFLARE = REPO / "drivers" / "engramdb" / "providers" / "_cloudflare.py"
WORKERS_AI = REPO / "workers" / "src" / "engramdb_workers" / "ai.py"


@pytest.fixture(scope="module")
def workers_ai() -> Iterator[ModuleType]:
    """``engramdb_workers.ai`` imported on CPython (it needs only the core there)."""
    sys.path.insert(0, str(WORKERS_AI.parents[1]))
    try:
        from engramdb_workers import ai

        yield ai
    finally:
        sys.path.remove(str(WORKERS_AI.parents[1]))


@pytest.mark.parametrize("model", sorted(MODELS))
def test_both_embedders_name_the_same_space_and_cut_texts_alike(
    workers_ai: ModuleType, model: str
) -> None:
    for pooling in (None, "cls"):
        rest = CloudflareEmbedder(
            model,
            account_id="acc123",
            api_token=FAKE_KEY,
            pooling=pooling,  # type: ignore[arg-type]
            transport=httpx.MockTransport(no_network),
        )
        binding = workers_ai.WorkersAIEmbedder(object(), model, pooling=pooling)
        assert rest.space == binding.space
        assert rest.max_chars == binding.max_chars == MODELS[model].max_chars
        assert rest.max_batch == binding.max_batch == MAX_BATCH
    assert workers_ai.DEFAULT_MODEL == DEFAULT_MODEL == CloudflareEmbedder.__init__.__defaults__[0]


def test_neither_module_keeps_a_model_table_of_its_own() -> None:
    """No Workers AI model name is written in either embedder's source: both import it."""
    for path in (CLOUDFLARE, WORKERS_AI):
        literals = [
            node.value
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.startswith("@cf/")
        ]
        assert literals == [], path.name


@pytest.mark.parametrize(
    ("message", "status"),
    [
        ("AiError: 3040: Capacity temporarily exceeded, please try again.", 429),
        ("AiError: 3007: Request timeout", 408),
        ("AiError: AiError: Request timeout (a613c7db-4321-4c07-ba94-a5702bc99d52)", 500),
        ("Network connection lost.", 500),
        ("AiError: 5007: No such model @cf/x or task", 400),
        ("AiError: 5006: text: must NOT have more than 100 items", 400),
        ("AiError: 3036: You have used up your daily free allocation", None),
        ("4006: you have used up your daily free allocation of 10,000 neurons", None),
    ],
)
def test_binding_errors_map_to_the_http_status_the_retry_policy_reads(
    workers_ai: ModuleType, message: str, status: int | None
) -> None:
    assert workers_ai.binding_status(message) == status
