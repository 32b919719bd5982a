"""``preflab serve --demo``: the server on a fresh SQLite file with a ready demo project built
from real PandaLM human preference data, and demo accounts with generated passwords.

Data: the bundled ``preflab/data/pandalm-sample.jsonl`` (200 PandaLM records, shipped in the
package, so the demo reads nothing outside it). Records are
turned into items and imported through the server's own import function; items on which all
three PandaLM annotators agree become the qualification set, with that agreement as the
explanation.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from ..demo import DEMO_PROJECT, DEMO_TITLE  # the CLI demo's project: same name, title and data

ACCOUNTS = (
    ("admin", True, None),
    ("reviewer", False, "reviewer"),
    ("rater1", False, "rater"),
    ("rater2", False, "rater"),
)
GUIDELINES = """# PandaLM pairwise comparison

Each task shows an **instruction** (sometimes with an input) and two model answers.

1. Read the instruction first, then both answers in full.
2. Prefer the answer that follows the instruction, is correct, and is concise.
3. Use *tie* only when neither answer is better.
4. Explain your choice in a sentence or two.

Press `?` at any time for these guidelines and the keys.
"""


def pandalm_records(limit: int = 200) -> tuple[list[dict[str, Any]], str]:
    """Up to ``limit`` PandaLM records and where they came from."""
    bundled = resources.files("preflab").joinpath("data/pandalm-sample.jsonl")
    if not bundled.is_file():
        raise FileNotFoundError(
            "no PandaLM data: preflab/data/pandalm-sample.jsonl is missing from the "
            "installed package; reinstall preflab (pip install -e .)"
        )
    lines = bundled.read_text(encoding="utf-8").splitlines()
    return [json.loads(x) for x in lines if x.strip()][:limit], "preflab/data/pandalm-sample.jsonl"


def pandalm_item(rec: dict[str, Any], *, gold: bool = False) -> dict[str, Any]:
    """A PandaLM record as a preflab item, through the importer's own PandaLM record format;
    a unanimous record can carry its agreed label as the hidden gold answer."""
    from ..io.formats import ConvertOptions
    from ..io.formats.shared_datasets import PANDALM
    from ..schema import Item

    converted = PANDALM.convert(rec, ConvertOptions()).items[0]
    assert isinstance(converted, Item)  # the PandaLM format builds Items (rows: fast paths only)
    item = converted.model_dump(mode="json", exclude_none=True)
    if gold:
        vote = rec["annotator1"]
        item["gold"] = {
            "judgment": {
                "kind": "pairwise",
                "shown_order": ["response1", "response2"],
                "winner": "a" if vote == 1 else "b",
                "strength": 2,
            },
            "explanation": f"All three PandaLM annotators preferred response {vote} "
            f"({'the first' if vote == 1 else 'the second'} one in the data set).",
        }
        item["metadata"]["qualification"] = True
    return item


def _one_per_pair(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The first record of each pair: PandaLM asks its annotators about each pair in both orders,
    and one pair is one item (``docs/item-identity.md``), so the repeat is left out."""
    from ..schema.identity import candidate_key, item_key

    seen: set[str] = set()
    kept = []
    for rec in records:
        prompt = (
            rec["instruction"]
            if not rec.get("input")
            else f"{rec['instruction']}\n\n{rec['input']}"
        )
        answers = [rec["response1"], rec["response2"]]
        key = item_key(prompt, [(candidate_key(a), a) for a in answers])
        if key not in seen:
            seen.add(key)
            kept.append(rec)
    return kept


def build_demo(db_url: str, *, n_items: int = 40, n_qualification: int = 5) -> dict[str, Any]:
    """Create the schema, demo accounts (generated passwords) and the demo project."""
    from .auth import create_user, get_user, set_membership
    from .database import Database, init_schema
    from .services import projects

    records, source = pandalm_records()
    records = _one_per_pair(records)
    unanimous = [r for r in records if r["annotator1"] == r["annotator2"] == r["annotator3"] != 0]
    qual_ids = {r["idx"] for r in unanimous[:n_qualification]}
    items = [pandalm_item(r, gold=True) for r in records if r["idx"] in qual_ids]
    items += [pandalm_item(r) for r in records if r["idx"] not in qual_ids][:n_items]
    init_schema(db_url)
    db = Database(db_url, pool_size=2, max_overflow=2)
    passwords: dict[str, str] = {}
    try:
        with db.writing() as s:
            project = projects.create_project(
                s,
                DEMO_PROJECT,
                title=DEMO_TITLE,
                kinds=["pairwise"],
                guidelines=GUIDELINES,
                policy={
                    "qualification": {"n_items": len(qual_ids), "min_items": 3, "pass_bar": 0.6},
                    "overlap_share": 0.5,
                    "overlap_k": 2,
                    "min_rationale_chars": 0,
                    "blind": True,
                },
            )
            for name, admin, role in ACCOUNTS:
                user, passwords[name] = create_user(s, name, is_admin=admin)
                if role:
                    set_membership(s, project, get_user(s, name), role)
        summary = projects.import_items(db, DEMO_PROJECT, items)
    finally:
        db.dispose()
    # the banner says what the project holds: records whose content is another item's become
    # an alias of it, so the records built above can be more than the items stored
    return {
        "project": DEMO_PROJECT,
        "source": source,
        **demo_counts(db_url),
        "passwords": passwords,
        "import": summary,
    }


def demo_counts(db_url: str) -> dict[str, int]:
    """Items, qualification items and labels of the demo project, as stored."""
    from sqlalchemy import func, select

    from ..store.models import JudgmentRow, Project
    from ..store.server_models import PoolEntry
    from .database import Database

    db = Database(db_url, pool_size=1, max_overflow=0)
    try:
        with db.reading() as s:
            project_pk = s.scalar(select(Project.pk).where(Project.name == DEMO_PROJECT))
            if project_pk is None:
                return {"items": 0, "qualification": 0, "labels": 0}
            roles = dict(
                s.execute(
                    select(PoolEntry.role, func.count())
                    .where(PoolEntry.project_pk == project_pk)
                    .group_by(PoolEntry.role)
                ).all()
            )
            labels = s.scalar(
                select(func.count())
                .select_from(JudgmentRow)
                .where(JudgmentRow.project_pk == project_pk)
            )
    finally:
        db.dispose()
    return {
        "items": int(sum(roles.values())),
        "qualification": int(roles.get("qualification", 0)),
        "labels": int(labels or 0),
    }


def serve_demo(
    host: str = "127.0.0.1", port: int = 8000, directory: Path = Path("preflab-demo")
) -> None:
    """Build the demo in a fresh SQLite file under ``directory`` and serve it (blocking)."""
    import os

    import uvicorn

    from .app import CONFIG_ENV, ServerConfig

    directory.mkdir(parents=True, exist_ok=True)
    db_file = directory / "demo.db"
    secrets = directory / "demo-passwords.txt"
    url = f"sqlite:///{db_file.resolve()}"
    kept = read_passwords(secrets) if db_file.exists() else None
    demo: dict[str, Any]
    if kept is not None and demo_counts(url)["items"]:
        # a second `make demo` keeps what people labelled (issue 31): the accounts, their
        # passwords and every label stay; removing the directory starts afresh
        demo = {"project": DEMO_PROJECT, **demo_counts(url), "passwords": kept}
        print(
            f"preflab demo: keeping the web app's database {db_file} "
            f"({demo['labels']} labels so far); remove {directory} for a fresh demo"
        )
    else:
        for suffix in ("", "-wal", "-shm"):
            Path(str(db_file) + suffix).unlink(missing_ok=True)
        demo = build_demo(url)
        write_passwords(secrets, demo["passwords"])
        print(f"preflab demo: a new web app database {db_file} (PandaLM, {demo['source']})")
    config = ServerConfig(db_url=url, exports_dir=(directory / "exports").resolve())
    os.environ[CONFIG_ENV] = config.to_env()
    print(
        f"project {demo['project']} ({DEMO_TITLE}): {demo['items']} items, "
        f"{demo['qualification']} of them for qualification"
    )
    print(f"open http://{host}:{port}/")
    print(f"demo accounts (passwords kept in {secrets.resolve()}, readable by you only):")
    for name, admin, role in ACCOUNTS:
        print(f"  {name:<9} {demo['passwords'].get(name, '?')}   {'site admin' if admin else role}")
    uvicorn.run(
        "preflab.server.app:app_from_env",
        factory=True,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
    )


def read_passwords(path: Path) -> dict[str, str] | None:
    """The passwords :func:`write_passwords` kept, or None when the file is missing or not
    one of its (a demo database without them is rebuilt: nobody could log in)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    pairs = [line.split(" ", 1) for line in lines if line.strip()]
    found = {p[0]: p[1] for p in pairs if len(p) == 2}
    return found if set(found) == {name for name, _, _ in ACCOUNTS} else None


def write_passwords(path: Path, passwords: dict[str, str]) -> Path:
    """The demo accounts' passwords in a file only the owner can read (mode 0600)."""
    import os

    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write("".join(f"{name} {pw}\n" for name, pw in passwords.items()))
    return path.resolve()
