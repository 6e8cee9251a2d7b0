"""Hybrid retrieval building blocks: BM25 arm (lexical), rank fusion (fusion), reranking."""
