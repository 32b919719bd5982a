"""The labelling rule flow: every rule of "next task" and "submit", written once.

Each rule is a small decision function over plain values (rows already fetched); the paths
that serve a request only fetch rows and write what the decisions say:

* :mod:`.next` — the rater's state gate (suspended, failed), domain match, the per-rater cap,
  which pool roles to try (production gold at the project rate), room on an item (exact k),
  the shown order and the task payload;
* :mod:`.submit` — the lease checks (owner, submitted, released, suspended, expired), the
  project's declared kinds and the item's fit, the plain pairwise judgment turned into its row
  values, and the one place the judgment row's columns are assembled;
* :mod:`.lane` — the two flows, every case, run on an executor (:mod:`preflab.server.exec`:
  the fast lane's, or the FastAPI routes'): statements compiled once
  (:mod:`preflab.server.sql`), the decisions above, and :class:`NotCommon` when the lane must
  hand a request to the route (which runs the same flow).

Authorization is :func:`preflab.server.permissions.allowed` on every executor; production gold
scoring and suspension are :mod:`preflab.server.services.gold_scoring` (after the commit).
"""

from .common import NotCommon, aware

__all__ = ["NotCommon", "aware"]
