"""PostgreSQL: the lane's generic plans do not depend on how big the tables were when planned.

The lane's connections plan each prepared statement once (``force_generic_plan``). Planned on a
small table, a lookup by primary key is cheaper as a sequential scan than through the index, and
that plan stays while the table grows: the submit's guard then read every lease of the project
for one lease id (issue 10: 0.43 ms a submit at 5,000 leases, against 0.10 ms through the index).
The lane's connections therefore plan with ``enable_seqscan=off``: wherever an index answers, it
is used, however small the table was at planning time.
"""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text

pytestmark = pytest.mark.postgres


def _generic_plan(cur, sql: str, arg: int) -> str:
    cur.execute(f"PREPARE probe AS {sql}", prepare=False)
    plan = cur.execute(f"EXPLAIN EXECUTE probe({int(arg)})", prepare=False).fetchall()
    cur.execute("DEALLOCATE probe", prepare=False)
    return "\n".join(r[0] for r in plan)


def test_a_lane_connection_looks_rows_up_by_index_on_a_table_planned_small(pg_url) -> None:
    import psycopg

    from preflab.server.exec.postgres import OPTIONS, conninfo

    engine = create_engine(pg_url)
    with engine.begin() as conn:  # a table of one page, analysed: a seq scan is cheapest
        conn.execute(text("CREATE TABLE t (pk bigint PRIMARY KEY, v text)"))
        conn.execute(text("INSERT INTO t SELECT g, 'x' FROM generate_series(1, 50) g"))
        conn.execute(text("ANALYZE t"))
    sql = "SELECT v FROM t WHERE pk = $1"
    with engine.connect() as conn:  # what a connection with the default settings plans
        raw = conn.connection.dbapi_connection
        default = _generic_plan(raw.cursor(), "SELECT v FROM t WHERE pk = $1", 7)
    with psycopg.connect(conninfo(engine.url), options=OPTIONS) as conn:  # a lane connection's
        lane = _generic_plan(conn.cursor(), sql, 7)
    engine.dispose()
    assert "Seq Scan" in default  # the trap: the cheapest plan for a one-page table
    assert "Index Scan" in lane and "Seq Scan" not in lane
