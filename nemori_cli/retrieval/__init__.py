"""Retrieval without an LLM (search) and answering with one (answer)."""
