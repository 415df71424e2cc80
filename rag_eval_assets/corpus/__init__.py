"""Corpus: document loaders, chunking, stable chunk ids, anchors and gold resolution."""
