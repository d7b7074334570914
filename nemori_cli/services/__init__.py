"""What the interfaces (cli/, mcp_server/) and the Python API (api.py) call: they never open the store themselves.

The work of the API's calls, given the session the façade opens (ingest.py, answer.py, and forget.py's
forget), and the work the API has no call for (read.py, export.py, dry_run.py, forget.py's count and scrub).
"""
