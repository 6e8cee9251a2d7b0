from tests.fakes import HashingEmbedder  # noqa: F401  (alias for branches in flight; use tests.fakes)
