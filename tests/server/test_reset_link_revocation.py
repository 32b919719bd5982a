"""Issue 31: a new password-reset link left the older unexpired ones valid. Issuing one now
revokes the others, on both databases; the revoked link says why, and the newest one works."""

from __future__ import annotations

import pytest

from preflab.server.auth import Gone, claim_reset_link, create_reset_link, create_user, get_user
from preflab.server.database import Database, init_schema


@pytest.fixture
def database(db_url: str):
    init_schema(db_url)
    db = Database(db_url, pool_size=2, max_overflow=2)
    with db.writing() as s:
        create_user(s, "alice", password="a-long-password-1")
        create_user(s, "bob", password="a-long-password-2")
    yield db
    db.dispose()


def test_a_new_reset_link_revokes_the_older_ones(database):
    with database.writing() as s:
        first = create_reset_link(s, get_user(s, "alice"), created_by=None)
        bobs = create_reset_link(s, get_user(s, "bob"), created_by=None)
    with database.writing() as s:
        second = create_reset_link(s, get_user(s, "alice"), created_by=None)
    with pytest.raises(Gone, match="replaced by a newer link"), database.writing() as s:
        claim_reset_link(s, first, "a-new-long-password-1")
    with database.writing() as s:
        assert claim_reset_link(s, second, "a-new-long-password-1").username == "alice"
    with database.writing() as s:  # another user's link is untouched
        assert claim_reset_link(s, bobs, "a-new-long-password-2").username == "bob"
    with pytest.raises(Gone, match="already used"), database.writing() as s:
        claim_reset_link(s, second, "yet-another-password-1")
