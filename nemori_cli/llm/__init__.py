"""LLM access: one structured interface (base), adapters, and a fake for tests."""
