"""Several users' memories built at once, into one store: threads, a shared request budget, one failure stops all.

`api.ingest_users` (services/ingest.ingest_users) prepares one Pipeline per user (each with a connection of
its own, its messages stored); this module runs them. Each user runs on a
thread of its own and writes its episodes in order; their model calls share
``workers`` requests in flight (llm/inflight.RequestSlots). With one worker the users
run one after another.

A store whose writers share one lock (SQLite: one write lock per file) would
let one user's unit of work hold every other user's for as long as the model
takes to answer; there each episode's calls are made with the lock free
(``lock_free_calls``, llm/inflight.ReplayBackend). A store that locks per user
(PostgreSQL) needs no such thing.

When one user's run fails (a dead endpoint), the others stop after the
episode in hand, and the first failure is raised, naming its user: what is
not done stays pending, and the same call resumes it.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from nemori_cli.errors import NemoriError
from nemori_cli.llm.inflight import RequestSlots
from nemori_cli.pipeline.ingest_report import IngestReport
from nemori_cli.pipeline.runner import Pipeline


def run_together(pipelines: dict[str, Pipeline], *, workers: int, flush: bool) -> dict[str, IngestReport]:
    """Each user's pipeline processed, ``workers`` requests in flight between them all; one report per user."""
    slots = RequestSlots(workers)

    def stop_others(user: str) -> None:
        for other, pipeline in pipelines.items():
            if other != user:
                pipeline.cancel.set()  # the others stop after the episode in hand

    def run(user: str) -> IngestReport:
        pipeline = pipelines[user]
        try:
            return pipeline.process(flush=flush, workers=workers, slots=slots, lock_free_calls=pipeline.db.one_write_lock)
        except BaseException:
            stop_others(user)
            raise

    reports: dict[str, IngestReport] = {}
    failures: list[tuple[str, NemoriError]] = []
    if workers == 1:
        for user in pipelines:
            try:
                reports[user] = run(user)
            except NemoriError as e:
                failures.append((user, e))
                break
    else:
        with ThreadPoolExecutor(max_workers=min(len(pipelines), workers), thread_name_prefix="nemori-user") as pool:
            futures = {user: pool.submit(run, user) for user in pipelines}
            try:
                for user, future in futures.items():
                    try:
                        reports[user] = future.result()
                    except NemoriError as e:
                        failures.append((user, e))
            except BaseException:  # Ctrl-C: every run stops after its episode in hand
                for pipeline in pipelines.values():
                    pipeline.cancel.set()
                raise
    if failures:
        user, error = failures[0]
        raise type(error)(f"user {user}: {error.message}") from None
    return reports
