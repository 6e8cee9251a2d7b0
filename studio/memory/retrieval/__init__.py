"""Hybrid retrieval: the engine behind `studio.memory.vector.VectorMemory` (the facade callers use).

Bottom to top (a module imports only those above it in this list):
- fusion.py, lexical.py, reranker.py: the primitives (RRF, BM25 and the tokenizer, the
  optional cross-encoder), the seed's `axiom.retrieval.*`;
- store.py: the Chroma client, its process lock, one collection per scope, the legacy move;
- chunks.py: the stored chunk record (metadata, splitting, the result row);
- config.py: RetrievalConfig, the measured knobs;
- views.py: a filter's BM25 views (own text, neighbouring context across turns, whole turn),
  which arms add evidence for the corpus's shape, the numpy build and the append update;
- corpus.py: corpus versions and the per-process corpus cache with its BM25 views;
- explain.py: QueryStats, the explain records, "why not this chunk?";
- temporal.py: the temporal arm's ranking within the turns a named time prefers;
- arms.py: the arms, each naming the evidence it reads;
- hybrid.py: the fused search (arms, fusion, focus, rerank, top k, link expansion).
docs/retrieval.md ("Module map") says the same with what each stage costs.
"""
