"""Text to vectors: the packaged MiniLM (`embedding`: torch or ONNX Runtime, `embedding_onnx`),
windows of its tokens (`chunking`) and token counts with its tokenizer (`counting`)."""
