"""Embedders: the protocol, sentence-transformers, and a deterministic fake."""
