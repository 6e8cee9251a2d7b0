"""The LLM client tests: each starts with an empty table of what servers were found to support."""

from __future__ import annotations

import pytest

from studio.memory.llm.capabilities import CAPABILITIES


@pytest.fixture(autouse=True)
def clean_capabilities():
    CAPABILITIES.clear()
    yield
    CAPABILITIES.clear()
