"""The framework's executor: the labelling flow behind the FastAPI routes, waiting its turn.

The fast lane serves the common case on the event loop and never waits for a lock; whatever it
hands on (an unauthenticated caller the guard must answer, a busy lock, a replay, a first
contact, a qualification answer, a refusal) reaches the FastAPI route, which — after its guard —
runs **the same flow** (:mod:`preflab.server.flow.lane`) here: synchronously, in a worker thread,
in one write transaction of the app's engine (:meth:`Database.writing`: ``BEGIN IMMEDIATE`` on
SQLite, waiting for the lock; READ COMMITTED on PostgreSQL, waiting for row locks). The flow's
statements run on that transaction's DBAPI cursor; its rare ORM steps (``SESSION``) get the
transaction's session. A guarded write that lost a race (:class:`Changed`) runs the flow again,
in a new transaction, so the answer is what the rows say now.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy.orm import Session

from ...store.models import utcnow
from ..database import Database
from ..errors import ServiceError
from ..flow.common import Changed
from ..flow.lane import BEGIN, SESSION, Flow, Lane
from . import answer, drive

#: Runs of a flow whose guarded write lost a race each time before the request is refused.
ATTEMPTS = 3


class FrameworkExecutor:
    """Values bound and read as the lane's executor of the same backend does them."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.rubrics: dict = {}
        self.is_pg = not db.is_sqlite
        if self.is_pg:  # psycopg: the postgres extra, only where PostgreSQL is used
            from .postgres import PgExecutor as values
        else:
            from .sqlite import SqliteExecutor as values  # type: ignore[assignment]
        self.dialect, self.mark = values.dialect, values.mark
        self.dt, self.json, self.false = values.dt, values.json, values.false
        self.load_json, self.load_dt = values.load_json, values.load_dt

    def run(self, make: Callable[[Lane], Flow]) -> Any:
        """Run the flow ``make(lane)`` in one write transaction and commit; again (a new lane,
        a new transaction) if a guarded write lost a race."""
        for _ in range(ATTEMPTS):
            lane = Lane(self, utcnow(), framework=True)
            try:
                with self.db.writing() as session:
                    out = self._drive(session, make(lane))
            except Changed:
                continue
            return out, lane
        raise ServiceError(
            409, "the assignment kept changing while this request ran; send it again"
        )

    def _drive(self, session: Session, flow: Flow) -> Any:
        cur = session.connection().connection.cursor()
        is_pg = self.is_pg

        def step(request: tuple) -> Any:
            kind = request[0]
            if kind == BEGIN:  # the transaction is the session's, begun already
                return None
            if kind == SESSION:  # ORM work, after (and before) the flow's own statements
                session.expire_all()
                out = request[1](session)
                session.flush()
                return out
            return answer(cur, request, returning=is_pg)

        try:
            return drive(flow, step)
        finally:
            cur.close()


def executor(db: Database) -> FrameworkExecutor:
    """The framework's executor of this database (made on first use, kept with it)."""
    found = getattr(db, "_framework_executor", None)
    if found is None:
        found = db._framework_executor = FrameworkExecutor(db)  # type: ignore[attr-defined]
    return found
