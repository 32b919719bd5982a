"""The same prompt exports the same way (issue 17 section 1): ``"Q"`` and a one-turn user chat
``[{"role": "user", "content": "Q"}]`` are one prompt (:mod:`preflab.schema.identity`), so the
plain (``--no-conversational``) form of both is ``"Q"``, not ``"user: Q"`` for the second."""

from __future__ import annotations

import orjson
import pytest

from preflab.io.export import ExportOptions, export_project
from preflab.io.export.base import prompt_value
from preflab.schema import Item, PairwiseJudgment, prompt_as_text
from preflab.store import Base, make_engine, transaction
from preflab.store.repo import add_item, add_judgment, create_project

CHAT = [{"role": "user", "content": "Name a colour."}]


def test_a_one_turn_user_chat_flattens_to_its_text():
    chat = Item(prompt=CHAT, candidates=[{"text": "Red."}]).prompt
    assert prompt_value(chat, conversational=False) == prompt_value(
        "Name a colour.", conversational=False
    )
    assert prompt_as_text(chat) == "Name a colour."
    # longer chats keep their roles
    longer = Item(
        prompt=[{"role": "system", "content": "Be brief."}, *CHAT], candidates=[{"text": "Red."}]
    ).prompt
    assert prompt_as_text(longer) == "system: Be brief.\n\nuser: Name a colour."


@pytest.mark.parametrize("fmt", ["trl-preference", "openrlhf"])
def test_the_plain_export_writes_a_one_turn_chat_prompt_as_its_text(db_url, tmp_path, fmt):
    engine = make_engine(db_url)
    Base.metadata.create_all(engine)
    try:
        with transaction(engine) as s:
            project = create_project(s, "p", kinds=["pairwise"])
            for n, prompt in enumerate([CHAT, "Name a colour."]):
                item = Item(
                    id=f"i{n}",
                    prompt=prompt,
                    candidates=[{"id": "a", "text": "Red."}, {"id": "b", "text": "Ok."}],
                )
                add_item(s, project, item)
                add_judgment(
                    s,
                    project,
                    PairwiseJudgment(
                        item_id=item.id,
                        shown_order=("a", "b"),
                        winner="a",
                        strength=2,
                        provenance={"rater_id": "r1"},
                    ),
                )
        out = tmp_path / fmt
        export_project(engine, "p", ExportOptions(format=fmt, out=out, conversational=False))
        rows = [orjson.loads(line) for line in (out / "train.jsonl").read_bytes().splitlines()]
        assert [r["prompt"] for r in rows] == ["Name a colour.", "Name a colour."]
    finally:
        engine.dispose()
