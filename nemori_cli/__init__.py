"""nemori: local-first episodic and semantic memory for LLM agents and chat logs."""

__version__ = "0.1.0"

__all__ = ["Memory", "__version__"]


def __getattr__(name: str):
    # Imported on first use: `import nemori_cli` (and `nemori --help`) must not pay for the models' libraries.
    if name == "Memory":
        from nemori_cli.api import Memory

        return Memory
    raise AttributeError(f"module 'nemori_cli' has no attribute {name!r}")
