"""Issue 11, dead end 5: agent trajectories on the label and review pages show each tool call
(name and arguments) and each tool output turn, distinct from the model's text, and mark the
turns a trainer does not learn from (``loss_mask`` 0)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from webui_helpers import build_site, login, shot
from webui_items import OPEN

TRAJECTORY_ITEM = {  # RLHF-2026.11 turns as candidate messages: tool_call {name, args}, loss_mask per turn
    "id": "traj-1",
    "prompt": [{"role": "user", "content": "How many Python files are there?"}],
    "candidates": [
        {
            "id": "run-a",
            "messages": [
                {
                    "role": "assistant",
                    "content": "Let me look.",
                    "loss_mask": 1,
                    "tool_call": {"name": "shell", "args": {"cmd": "find . -name '*.py' | wc -l"}},
                },
                {"role": "tool", "name": "shell", "content": "2\n", "loss_mask": 0},
                {"role": "assistant", "content": "Hmm, maybe 3? Let me recount.", "loss_mask": 0},
                {"role": "assistant", "content": "There are **2** Python files.", "loss_mask": 1},
            ],
        },
        {
            "id": "run-b",
            "messages": [{"role": "assistant", "content": "Probably 5.", "loss_mask": 1}],
        },
    ],
}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("traj-site")
    s = build_site(
        tmp,
        {"root": True, "alice": False, "rita": False},
        [
            {
                "name": "traj",
                "title": "Agent runs",
                "kinds": ["pairwise"],
                "policy": {**OPEN, "spot_review_share": 1.0},
                "members": {"alice": "rater", "rita": "reviewer"},
                "items": [TRAJECTORY_ITEM],
            }
        ],
    )
    yield s
    s.server.stop()


def _check_run_a(page) -> None:
    run = page.locator('.answer[data-candidate="run-a"]').first
    call = run.locator(".tool-call")
    expect(call.locator(".tool-name")).to_have_text("shell")
    expect(call.locator(".tool-args")).to_contain_text('"cmd": "find . -name \'*.py\' | wc -l"')
    output = run.locator("details.turn-tool")
    expect(output).to_have_count(1)
    expect(output.locator("summary")).to_contain_text("tool output · shell")
    assert output.evaluate("el => getComputedStyle(el).borderTopStyle") == "dashed", (
        "tool turns look unlike model text"
    )
    masked = run.locator(".turn.masked")
    expect(masked).to_have_count(2)  # the tool output and the discarded guess
    expect(masked.nth(1)).to_contain_text("Hmm, maybe 3?")
    expect(masked.nth(1).locator(".loss-masked")).to_have_text("masked · not trained on")
    expect(run.locator(".turn-assistant:not(.masked)")).to_have_count(2)


def test_label_and_review_pages_show_tool_calls_outputs_and_masked_turns(site, new_page):
    page = new_page(site)
    login(page, "alice", next_path="/p/traj/label")
    with page.expect_navigation():
        page.locator('[data-action="get-task"]').click()
    _check_run_a(page)
    shot(page, "60-trajectory-label")
    page.keyboard.press("4")
    with page.expect_navigation():
        page.keyboard.press("Control+Enter")
    page.guard.assert_clean()

    review = new_page(site)
    login(review, "rita", next_path="/p/traj/review/item/traj-1")
    _check_run_a(review)
    shot(review, "61-trajectory-review")
    review.guard.assert_clean()


# -- issue 13 §3: an imported trajectory turn by turn, with its verifier result for reviewers only ------

NORMATIVE = (
    __import__("pathlib").Path(__file__).resolve().parents[1]
    / "data"
    / "trajectory-rlhf-2026.11.json"
)
FAILED_REASON = "expected test loom_mpsc_drop_wakeup did not run"


def _failed_trajectory() -> dict:
    """The spec's normative trajectory, with a verifier that failed (and says why)."""
    import json

    record = json.loads(NORMATIVE.read_text())
    record["trajectory_id"] = "traj-failed"
    record["verifier"] = {
        "f2p_exit": 1,
        "p2p_exit": 0,
        "harness_sha256_verified": False,
        "terminal_reward": 0.0,
        "reason": FAILED_REASON,
    }
    return record


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    import json

    from sqlalchemy import create_engine

    from preflab.io.importer import import_files

    tmp = tmp_path_factory.mktemp("traj-import")
    s = build_site(
        tmp,
        {"root": True, "tess": False, "rev": False},
        [
            {
                "name": "agents",
                "title": "Imported agent runs",
                "kinds": ["unary", "steps"],
                "policy": OPEN,
                "members": {"tess": "rater", "rev": "reviewer"},
            }
        ],
    )
    path = tmp / "trajectories.jsonl"
    path.write_text(json.dumps(_failed_trajectory()) + "\n")
    engine = create_engine(f"sqlite:///{tmp / 'web.db'}")
    import_files(engine, "agents", [path])
    engine.dispose()
    yield s
    s.server.stop()


def test_review_page_shows_the_trajectory_turn_by_turn_with_rubric_and_verifier(imported, new_page):
    page = new_page(imported)
    login(page, "rev", next_path="/p/agents/review/item/traj-failed")
    traj = page.locator("#trajectory")
    turns = traj.locator(".turns > li")
    expect(turns).to_have_count(3)
    expect(turns.nth(0)).to_have_class("turn turn-user masked")
    expect(turns.nth(0)).to_contain_text("Fix lost wake-up in BoundedMpsc::send_async")
    # the assistant turn: its PRM steps with their imported verdicts, then the tool call with its arguments
    steps = turns.nth(1).locator(".prm-step")
    expect(steps).to_have_count(2)
    expect(steps.nth(0)).to_contain_text("Inspecting src/channel/mpsc.rs")
    expect(steps.nth(1).locator(".verdict")).to_have_text("+1")
    expect(turns.nth(1).locator(".tool-name")).to_have_text("apply_patch_and_test")
    expect(turns.nth(1).locator(".tool-args")).to_contain_text('"diff_lines": 19')
    expect(turns.nth(1)).not_to_have_class("turn turn-assistant masked")
    # the tool output, distinct and masked
    expect(turns.nth(2).locator(".role")).to_contain_text("tool output")
    expect(turns.nth(2).locator(".tool-output")).to_contain_text("482loom permutations passed")
    expect(turns.nth(2).locator(".loss-masked")).to_have_text("masked · not trained on")
    # rubric scores and the verifier result
    expect(traj.locator('.rubric-scores [data-dimension="verbosity_penalty"]')).to_have_text(
        "-0.02"
    )
    verifier = traj.locator("#verifier")
    expect(verifier.locator(".badge")).to_have_text("failed")
    expect(verifier.locator('[data-field="f2p_exit"]')).to_have_text("1")
    expect(verifier.locator('[data-field="harness_sha256_verified"]')).to_have_text("false")
    expect(verifier.locator('[data-field="terminal_reward"]')).to_have_text("0.0")
    expect(verifier.locator('[data-field="reason"]')).to_have_text(FAILED_REASON)
    shot(page, "62-trajectory-verifier-review")
    page.guard.assert_clean()


def test_a_rater_sees_masked_turns_but_never_the_verifier(imported, new_page):
    page = new_page(imported)
    login(page, "tess", next_path="/p/agents/label?kind=steps")
    with page.expect_navigation():
        page.locator('[data-action="get-task"]').click()
    # turn by turn: the assistant's two steps, each with its verdict control, then its tool call,
    # then the tool output (masked: the mask is read from the stored record)
    run = page.locator("#steps > li")
    expect(run).to_have_count(4)
    expect(run.nth(0)).to_have_class("step")
    expect(run.nth(0)).to_contain_text("Inspecting src/channel/mpsc.rs")
    expect(run.nth(1).locator(".verdict input")).to_have_count(3)
    expect(run.nth(2).locator(".tool-name")).to_have_text("apply_patch_and_test")
    expect(run.nth(2).locator(".tool-args")).to_have_text('{"diff_lines": 19}')
    expect(run.nth(3).locator("details.turn-tool summary")).to_contain_text("tool output")
    expect(run.nth(3).locator(".loss-masked")).to_have_count(1)
    expect(page.locator(".step .verdict input:checked")).to_have_count(
        0
    )  # imported verdicts are not shown
    html = page.content()
    for secret in (
        "harness_sha256_verified",
        "f2p_exit",
        "terminal_reward",
        FAILED_REASON,
        "Verifier",
    ):
        assert secret not in html, f"a rater's label page shows {secret!r}"
    shot(page, "63-trajectory-rater-label")
    # the rater's API payload (the engine's task for their live lease) holds none of it either
    payload = page.evaluate("""async () => {
        const csrf = document.querySelector('meta[name="csrf-token"]').content;
        const r = await fetch("/api/v1/projects/agents/assignments/next", {method: "POST", headers: {"X-CSRF-Token": csrf}});
        return await r.text(); }""")
    assert "traj-failed" in payload
    # the steps still label as before: two steps, stored with the answer's own split
    page.locator(".step").nth(0).focus()
    page.keyboard.press("1")
    page.keyboard.press("1")
    with page.expect_navigation():
        page.keyboard.press("Control+Enter")
    [mine] = [
        j["body"] for j in imported.judgments("agents", "traj-failed") if j["rater"] == "tess"
    ]
    assert mine["verdicts"] == [1, 1] and mine["steps"][0].startswith(
        "Inspecting src/channel/mpsc.rs"
    )
    for secret in (
        "verifier",
        "harness_sha256",
        "f2p_exit",
        "terminal_reward",
        FAILED_REASON,
        'rubric": {"',
    ):
        assert secret not in payload, f"a rater's task payload carries {secret!r}"
    page.guard.assert_clean()
