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

    item = (
        PANDALM.convert(rec, ConvertOptions()).items[0].model_dump(mode="json", exclude_none=True)
    )
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
    from . import projects
    from .auth import create_user, get_user, set_membership
    from .database import Database, init_schema

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
    return {
        "project": DEMO_PROJECT,
        "source": source,
        "items": len(items),
        "qualification": len(qual_ids),
        "passwords": passwords,
        "import": summary,
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
    for suffix in ("", "-wal", "-shm"):
        Path(str(db_file) + suffix).unlink(missing_ok=True)
    url = f"sqlite:///{db_file.resolve()}"
    demo = build_demo(url)
    config = ServerConfig(db_url=url, exports_dir=(directory / "exports").resolve())
    os.environ[CONFIG_ENV] = config.to_env()
    secrets_file = write_passwords(directory / "demo-passwords.txt", demo["passwords"])
    print(
        f"preflab demo: {demo['items']} PandaLM items ({demo['qualification']} for qualification) from {demo['source']}"
    )
    print(f"open http://{host}:{port}/  (project {demo['project']}: {DEMO_TITLE})")
    print(f"database: {db_file}")
    print(f"demo accounts (passwords generated now; kept in {secrets_file}, readable by you only):")
    for name, admin, role in ACCOUNTS:
        print(f"  {name:<9} {demo['passwords'][name]}   {'site admin' if admin else role}")
    uvicorn.run(
        "preflab.server.app:app_from_env",
        factory=True,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
    )


def write_passwords(path: Path, passwords: dict[str, str]) -> Path:
    """The demo accounts' passwords in a file only the owner can read (mode 0600)."""
    import os

    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write("".join(f"{name} {pw}\n" for name, pw in passwords.items()))
    return path.resolve()
