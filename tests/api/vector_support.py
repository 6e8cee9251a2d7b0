from tests.fakes import HashingEmbedder, make_vector_memory  # noqa: F401  (aliases for branches in flight; use tests.fakes)
