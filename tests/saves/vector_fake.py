from tests.fakes import FakeVectorMemory, VectorStoreDown  # noqa: F401  (aliases for branches in flight; use tests.fakes)
