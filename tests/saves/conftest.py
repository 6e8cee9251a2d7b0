"""Settings for the checkpoint tests: a failed job attempt is final unless a test says otherwise.

The vector jobs of rewind and fork go through the job ledger, which retries a failed
attempt with backoff up to AXIOM_JOB_MAX_ATTEMPTS. These tests look at one attempt at a
time (FAILED after a failed delete, then each explicit retry), as the memory tests'
`eager_jobs` fixture does; the tests of the automatic retries raise the limit themselves.
"""
from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def one_attempt_per_job(settings):
    settings.AXIOM_JOB_MAX_ATTEMPTS = 1
    return settings
