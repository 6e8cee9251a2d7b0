from tests.fakes import HashingEmbedder as HashEmbedder, make_vector_memory, vector_memory  # noqa: F401  (aliases; use tests.fakes)
