"""Text to vectors: the packaged MiniLM (`embedding`: torch or ONNX Runtime, `embedding_onnx`),
windows of its tokens (`chunking`), the one token counter with its tokenizer (`tokens`) and
the word and token counts of lore text (`counting`)."""
