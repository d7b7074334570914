"""`nemori doctor`: is this install, and this model, fit for ingesting?

checks.py   install checks (Python, SQLite extensions, model files or endpoint, embedder)
sample.py   the fixed conversation the probe runs on
probe.py    each pipeline stage's real code, once, on a throwaway database
measure.py  per-stage and overall figures from the probe's call log
verdict.py  the verdict and what to do
run.py      the order of it all, and the rates kept for cost estimates
"""
