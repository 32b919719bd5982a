"""``preflab advise --create-project NAME``: a demonstration project from the cold-start prompts.

Each prompt of ``demonstrations.jsonl`` becomes an item of a new project that collects the
``demonstration`` judgment kind: the prompt, and the policy's own sampled answer as the one
candidate (the draft an expert rewrites or replaces), with the task id and the measured
pass@k in the item's metadata. The project must not exist yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from preflab.cli_common import engine_for


def create_demonstration_project(
    db: str | None, name: str, rows: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    from preflab.schema import Item
    from preflab.store import repo, transaction
    from preflab.store.repo import StoreError

    if not rows:
        raise ValueError("no prompts need demonstrations; no project was created")
    engine = engine_for(db)
    try:
        with transaction(engine) as session:
            try:
                repo.get_project(session, name)
            except repo.NotFound:
                pass
            else:
                raise ValueError(f"project {name!r} exists already; choose another name")
            project = repo.create_project(
                session,
                name,
                title="SFT demonstrations (cold start, from measured pass@k)",
                kinds=["demonstration"],
            )
            for row in rows:
                draft = row.get("draft")
                metadata = {k: v for k, v in row.items() if k not in ("prompt", "draft", "domain")}
                item = Item(
                    prompt=row["prompt"],
                    candidates=[
                        {
                            "id": "policy",
                            "text": draft if isinstance(draft, str) else "",
                            "model": row.get("model"),
                        }
                    ],
                    domains=[row["domain"]] if row.get("domain") else [],
                    metadata={"source": "preflab advise", **metadata},
                )
                repo.add_item(session, project, item)
    except StoreError as e:
        raise ValueError(str(e)) from e
    finally:
        engine.dispose()
    return {"name": name, "items": len(rows)}
