"""`nemori mcp`: the memory as a Model Context Protocol server, for agents (server.py)."""
