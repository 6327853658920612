"""The Chat page when the model call fails, and follow-ups before saving (issue #32, items 2 to 4 and 6).

Claude is the real SDK client over a fake HTTP transport (the `claude` fixture, tests/helpers/model.py's FakeAPI):
a stream that breaks mid-reply, a 529 after a good draft, follow-ups sent before the proposal is saved.
"""

from __future__ import annotations

from lib.chat.model import message, text_block, tool_use_block
from lib.memory import workspace
from lib.roles.access import User
from tests.helpers.app import on_page, page_text, signed_in
from tests.helpers.model import MODEL, FakeAPI, broken_stream, error_response

from ..conftest import ROOT

CHAT = "app_pages/chat.py"
SLUG = "supply-chain-weekly"
DEMO = workspace.load(ROOT / "workspaces" / SLUG)[0].data["dashboard"]
SAVE = "Save to my draft"


def reply(*blocks) -> dict:
    return message(*blocks, usage={"input_tokens": 50, "output_tokens": 20}, model=MODEL)


def write(spec: dict, block_id: str = "t1", *before) -> dict:
    return reply(*before, tool_use_block(block_id, "write_dashboard", {"yaml": workspace.render("dashboard", spec)}))


def ask(at, text: str):
    at.chat_input[0].set_value(text).run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def saved_dashboard(at) -> dict:
    repo = at.session_state["config_repo"]
    return workspace.load(repo.draft(User("sam", app_role="steward"), SLUG).workspace_path)[0].data["dashboard"]


def save(at) -> None:
    [button] = [b for b in at.button if b.label == SAVE]
    assert not button.disabled
    button.click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert any("Saved to your draft" in s.value for s in at.success), [s.value for s in at.success]


def test_a_stream_broken_after_a_good_draft_says_so_once_and_the_draft_can_be_saved(claude: FakeAPI):
    renamed = {**DEMO, "title": "Supply chain weekly, renamed"}
    claude.replies.extend([write(renamed, "t1", text_block("Renaming it.")), broken_stream(reply(text_block("I renamed the dashboard.")))])
    at = ask(on_page(signed_in("sam"), CHAT), "Rename the dashboard")
    shown = page_text(at)
    assert "Something went wrong" not in shown and "Traceback" not in shown and "RemoteProtocolError" not in shown
    assert shown.count("broke in the middle of its reply") == 1, shown  # once: not in the reply and again below it
    [said] = [m.value for m in at.markdown if m.value.startswith("Renaming it.")]
    assert said.startswith("Renaming it.\n\nI renamed the dashboard. …") and "partial reply" in said  # steps apart, cut short marked
    assert any("+title: Supply chain weekly, renamed" in c.value for c in at.code)
    assert any("stopped before Claude finished" in w.value for w in at.warning)
    assert any("1 model call(s)" in c.value for c in at.caption)  # the completed step's tokens are counted
    save(at)
    assert saved_dashboard(at)["title"] == "Supply chain weekly, renamed"


def test_a_529_after_a_good_draft_leaves_a_save_that_saves_it_with_the_checks_verdict(claude: FakeAPI):
    renamed = {**DEMO, "title": "Renamed before the API was overloaded"}
    claude.replies.extend([write(renamed), error_response(529, "overloaded_error")])
    at = ask(on_page(signed_in("sam"), CHAT), "Rename the dashboard")
    shown = page_text(at)
    assert shown.count("the Anthropic API is overloaded (529)") == 1 and "overloaded_error" not in shown, shown
    assert any("The checks pass" in s.value for s in at.success)  # the verdict beside the Save
    save(at)
    assert saved_dashboard(at)["title"] == "Renamed before the API was overloaded"


def test_follow_ups_before_saving_build_on_the_pending_change_and_a_failed_one_loses_nothing(claude: FakeAPI):
    first = {**DEMO, "title": "Supply chain weekly, renamed"}
    both = {**first, "description": "Described in a follow-up."}
    claude.replies.extend([write(first), reply(text_block("Renamed.")), write(both, "t2"), reply(text_block("Described."))])
    at = ask(on_page(signed_in("sam"), CHAT), "Rename the dashboard")
    assert any("conversation" in c.value and "not kept" in c.value for c in at.caption), [c.value for c in at.caption]
    ask(at, "Now give it a description")
    dashboard_block = claude.bodies[2]["messages"][0]["content"][1]["text"]  # the follow-up's first request
    assert dashboard_block.startswith("# Current dashboard") and "title: Supply chain weekly, renamed" in dashboard_block
    [diff] = [c.value for c in at.code if "a/dashboard.yaml" in c.value]
    assert "+title: Supply chain weekly, renamed" in diff and "Described in a follow-up." in diff  # both changes, against the draft
    assert saved_dashboard(at)["title"] == DEMO["title"]  # nothing saved yet

    claude.replies.append(error_response(529, "overloaded_error"))
    ask(at, "And make it blue")
    assert any("overloaded (529)" in e.value for e in at.error)
    [diff] = [c.value for c in at.code if "a/dashboard.yaml" in c.value]
    assert "+title: Supply chain weekly, renamed" in diff and "Described in a follow-up." in diff  # still pending, both
    save(at)
    saved = saved_dashboard(at)
    assert saved["title"] == "Supply chain weekly, renamed" and saved["description"] == "Described in a follow-up."


def test_a_query_follow_up_carries_this_chats_previous_question_and_answer(claude: FakeAPI):
    claude.replies.extend([reply(text_block("Lyon missed its target.")), reply(text_block("By 9 %."))])
    at = ask(on_page(signed_in("vera"), CHAT), "Which site missed its target?")
    assert any("previous question" in c.value and "not kept" in c.value for c in at.caption)
    ask(at, "By how much?")
    turns = claude.bodies[1]["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert turns[0]["content"][-1]["text"] == "Which site missed its target?" and turns[1]["content"][0]["text"] == "Lyon missed its target."
    assert turns[2]["content"][0]["text"] == "By how much?"


def test_a_proposal_with_nothing_to_save_yet_offers_no_save_until_a_rule_is_ticked(claude: FakeAPI):
    claude.replies.extend(
        [
            reply(tool_use_block("r1", "propose_rule", {"id": "weekly-attainment", "text": "Attainment is actual over target, by week."})),
            reply(text_block("Proposed a rule.")),
        ]
    )
    at = ask(on_page(signed_in("sam"), CHAT), "Propose a rule for attainment")
    assert not [b for b in at.button if b.label == SAVE] and any("Nothing to save yet" in i.value for i in at.info)
    next(c for c in at.checkbox if "weekly-attainment" in c.label).check().run()
    save(at)
    repo = at.session_state["config_repo"]
    task = workspace.load(repo.draft(User("sam", app_role="steward"), SLUG).workspace_path)[0].data["task"]
    assert task["rules"][-1]["id"] == "weekly-attainment"
