"""What the interfaces (cli/, mcp_server/) call for the work the Python API (api.py) has no call for: they never open the store themselves."""
