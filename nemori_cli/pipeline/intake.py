"""Messages in: stored (all or none) and indexed for search, with no model; the runner builds them later."""

from __future__ import annotations

from nemori_cli.domain import IncomingMessage
from nemori_cli.embed.base import Embedder, identity, max_chars
from nemori_cli.memory.profile import Profile, record
from nemori_cli.store import message_index
from nemori_cli.store import messages as message_sql
from nemori_cli.store.contract import Store


def store_messages(db: Store, user: str, profile: Profile, embedder: Embedder, incoming: list[IncomingMessage], namespace: str = "") -> int:
    """Store new messages (all or none), index them for search, and the profile; returns how many were new.

    No model is needed: once this returns, the messages are searchable and
    answerable as raw turns (`ingest --build later`), and pending for the
    pipeline. Messages not indexed before (a database made before the
    message index existed) are indexed here too, in the same transaction.
    """
    with db.transaction(user=user):
        db.bind_embedder(identity(embedder), embedder.dimensions)
        record(db, profile)
        added = message_sql.insert_messages(db, user, incoming, namespace)
        message_index.index_all(db, user, embedder.embed_documents, max_chars(embedder), how=profile.turn_vectors)
        return added
