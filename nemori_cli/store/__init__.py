"""The SQLite store: connection and migrations (db), and all SQL by table group."""
