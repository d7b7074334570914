"""nemori: local-first episodic and semantic memory for LLM agents and chat logs."""

__version__ = "0.1.0"
