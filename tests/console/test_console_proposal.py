"""A breakpoint with a proposal reads as the call it asks about: its title is the review
page's headline and its question secondary text (inline code as <code>, never literal
backticks), its proposed values a table in the main column (long text and code
highlighted), and on the confirmation step a reviewer's edits are a diff against the
proposal, shown before the result. The payload decides, whoever sent it: the gateway's
breakpoints (built here with the gateway's own code) and any agent's alike. Everything an
agent sends is escaped or sanitized."""

import html
import re

from bpm_client.bodies import breakpoint_body
from bpm_client.gateway.config import Defaults, Rule
from bpm_client.gateway.decisions import breakpoint_fields

from breakpoints.models import Breakpoint
from tests.support.console import XSS, XSS_SCRIPT, action_url, review_url

WRITE_FILE_SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "content": {"type": "string"},
        "append": {"type": "boolean", "title": "Append"},
    },
    "required": ["path", "content"],
    "additionalProperties": False,
}
CONTENT = 'def greet(name):\n    return f"Hello, {name}"\n\n\nprint(greet("world"))\n'
ARGUMENTS = {"path": "/srv/app/greet.py", "content": CONTENT, "append": False}
DESCRIPTION = "Create a new file or completely overwrite an existing file with new content."


def gated_call(make_breakpoint, arguments=ARGUMENTS, description=DESCRIPTION, tool="write_file"):
    """The breakpoint `bpm gateway` opens for a `write_file` call on `filesystem`."""
    question, fields = breakpoint_fields(
        server="filesystem",
        tool=tool,
        description=description,
        schema=WRITE_FILE_SCHEMA,
        arguments=arguments,
        rule=Rule(tools=("*",), action="ask"),
        defaults=Defaults(),
    )
    body = breakpoint_body(question, **fields)
    return make_breakpoint(
        payload=body["payload"], title=body["title"], tags=body["tags"], agent_id="gateway"
    )


def text_of(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def section(page: str, element_id: str) -> str:
    """The markup of the element with this id, up to its closing tag (not nested alike)."""
    start = page.index(f'id="{element_id}"')
    tag = page[page.rindex("<", 0, start) + 1 :].split()[0]
    return page[start : page.index(f"</{tag}>", start)]


def rows_of(table: str) -> dict[str, str]:
    """A proposal table's rows: the property's name -> the value cell's markup."""
    found = re.findall(r'<tr data-bpm-value="([^"]*)">.*?<td[^>]*>(.*?)</td>\s*</tr>', table, re.S)
    return dict(found)


# --- the review page --------------------------------------------------------------


def test_a_gated_calls_headline_is_its_title_and_the_instruction_is_plain_text(
    reviewer_browser, make_breakpoint
):
    bp = gated_call(make_breakpoint)

    page = reviewer_browser.get(review_url(bp.pk)).content.decode()
    head = section(page, "bpm-head")

    (headline,) = re.findall(r'<h1 class="bpm-ask">(.*?)</h1>', head, re.S)
    assert headline.strip() == "Call write_file on filesystem?"
    lede = section(head, "bpm-lede")
    assert "<code>write_file</code>" in lede and "<code>filesystem</code>" in lede
    assert "`" not in text_of(lede)
    assert "An agent wants to run the tool write_file on the MCP server filesystem" in (
        text_of(lede)
    )
    assert "What the tool does: Create a new file" in text_of(lede)


def test_the_proposed_values_are_a_table_in_the_main_column_code_highlighted(
    reviewer_browser, make_breakpoint
):
    bp = gated_call(make_breakpoint)

    page = reviewer_browser.get(review_url(bp.pk)).content.decode()
    main = page.split('<div class="bpm-main">', 1)[1].split('<aside class="bpm-side">', 1)[0]
    table = section(main, "bpm-proposal")
    rows = rows_of(table)

    # The form's order: its required properties first, then the others by name.
    assert list(rows) == ["path", "content", "append"]
    assert text_of(rows["path"]).strip() == "/srv/app/greet.py"
    assert '<code class="bpm-value bpm-value--literal">false</code>' in rows["append"]
    # The file's text is highlighted as the path's language (Python here), lines kept.
    content = rows["content"]
    assert 'class="bpm-highlight"' in content
    assert '<span class="k">def</span>' in content
    assert text_of(content).strip() == CONTENT.strip()
    assert main.index('id="bpm-proposal"') < main.index('id="bpm-files"')


def test_any_breakpoint_with_a_proposal_gets_the_table_and_the_title_as_headline(
    reviewer_browser, make_breakpoint
):
    """No gateway here: an agent's own form. Values are JSON literals; a long text without
    a file name to tell its language is a plain block; a list too long for a line is
    pretty JSON."""
    note = "Roll out gradually. " * 10
    bp = make_breakpoint(
        payload={
            "question": "Deploy `2.4.1` to prod?",
            "title": "Deploy",
            "proposal": {
                "replicas": 3,
                "notify": True,
                "window": None,
                "note": note,
                "hosts": [f"host-{n}.example.com" for n in range(8)],
            },
        }
    )

    page = reviewer_browser.get(review_url(bp.pk)).content.decode()
    rows = rows_of(section(page, "bpm-proposal"))
    head = section(page, "bpm-head")

    assert re.search(r'<h1 class="bpm-ask">\s*Deploy\s*</h1>', head)
    assert "Deploy <code>2.4.1</code> to prod?" in section(head, "bpm-lede")
    assert list(rows) == ["hosts", "note", "notify", "replicas", "window"]
    assert '<code class="bpm-value bpm-value--literal">true</code>' in rows["notify"]
    assert '<code class="bpm-value bpm-value--literal">3</code>' in rows["replicas"]
    assert '<code class="bpm-value bpm-value--literal">null</code>' in rows["window"]
    assert '<pre class="bpm-pre">' in rows["note"] and text_of(rows["note"]) == note
    assert 'class="bpm-highlight"' in rows["hosts"]
    assert text_of(rows["hosts"]).count("host-") == 8


def test_what_an_agent_sends_in_the_question_and_the_proposal_is_escaped(
    reviewer_browser, make_breakpoint
):
    arguments = {"path": f"/srv/{XSS}.py", "content": f"x = 1\n# {XSS}\n"}
    bp = gated_call(make_breakpoint, arguments=arguments, description=f"`{XSS}` and {XSS}")

    page = reviewer_browser.get(review_url(bp.pk)).content.decode()
    lede = section(section(page, "bpm-head"), "bpm-lede")
    rows = rows_of(section(page, "bpm-proposal"))

    assert XSS_SCRIPT not in page and "<img src=x" not in page
    assert (
        "<code>&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;</code>"
        in (lede)
    )
    assert text_of(rows["path"]).strip() == f"/srv/{XSS}.py"
    assert f"# {XSS}" in text_of(rows["content"])


# --- the answer form ----------------------------------------------------------------


def test_a_checkbox_sits_inside_its_own_label(reviewer_browser, make_breakpoint):
    """The box and its label are one line of their own, not run into the next field's
    label."""
    bp = gated_call(make_breakpoint)

    page = reviewer_browser.get(review_url(bp.pk)).content.decode()
    field = section(page, "bpm-answer").split('data-bpm-field="value__append"', 1)[1]
    field = field.split("</div>", 1)[0]

    assert re.search(
        r'<label class="bpm-check" for="id_value__append">\s*'
        r'<input type="checkbox" name="value__append" id="id_value__append">\s*'
        r"<span>Append</span>\s*</label>",
        field,
    ), field


def test_a_multi_line_text_is_edited_in_a_text_area_and_sent_back_unchanged(
    reviewer_browser, make_breakpoint
):
    """A browser sends a text area's lines as CRLF: approving the proposal as shown sends
    the proposal, not an edit."""
    bp = gated_call(make_breakpoint)
    page = reviewer_browser.get(review_url(bp.pk)).content.decode()
    assert '<textarea name="value__content"' in section(page, "bpm-answer")

    posted = {
        "decision": "approve",
        "comment": "",
        "value__path": ARGUMENTS["path"],
        "value__content": CONTENT.replace("\n", "\r\n"),
    }
    confirm = reviewer_browser.post(action_url("release", bp.pk), posted).content.decode()
    assert "None: the proposal is approved as it is." in section(confirm, "bpm-answer-changes")

    reviewer_browser.post(action_url("release", bp.pk), {**posted, "confirm": "yes"})
    result = Breakpoint.objects.get(pk=bp.pk).result
    assert (result["values"], result["edited"]) == (ARGUMENTS, False)


# --- the confirmation step ------------------------------------------------------------


def test_the_confirmation_shows_an_edited_text_as_a_line_diff_before_the_result(
    reviewer_browser, make_breakpoint
):
    bp = gated_call(make_breakpoint)
    edited = CONTENT.replace("Hello", "Hi")

    confirm = reviewer_browser.post(
        action_url("release", bp.pk),
        {
            "decision": "approve",
            "comment": "",
            "value__path": ARGUMENTS["path"],
            "value__content": edited,
            "value__append": "on",
        },
    ).content.decode()
    changes = section(confirm, "bpm-answer-changes")

    assert confirm.index('id="bpm-answer-changes"') < confirm.index('id="bpm-result-preview"')
    diff = changes.split('data-bpm-change="content"', 1)[1].split("</tr>", 1)[0]
    assert '<span class="gd">-    return f"Hello, {name}"</span>' in diff
    assert '<span class="gi">+    return f"Hi, {name}"</span>' in diff
    append = changes.split('data-bpm-change="Append"', 1)[1].split("</tr>", 1)[0]
    assert '<del class="bpm-diff__old"><code>false</code></del>' in append
    assert '<ins class="bpm-diff__new"><code>true</code></ins>' in append
    assert 'data-bpm-change="path"' not in changes


def test_the_changes_of_a_typed_form_are_json_literals_listed_before_the_result(
    reviewer_browser, make_breakpoint
):
    """The table says `true`/`false`/`"staging"` as the JSON under it does, not Python's
    True/False."""
    form = {
        "type": "object",
        "properties": {
            "environment": {"type": "string", "enum": ["staging", "prod"]},
            "notify": {"type": "boolean", "title": "Notify the team"},
            "reason": {"type": "string"},
        },
        "required": ["environment"],
    }
    bp = make_breakpoint(
        payload={
            "question": "Deploy?",
            "title": "Deploy",
            "form": form,
            "proposal": {"environment": "prod", "notify": True},
        }
    )

    confirm = reviewer_browser.post(
        action_url("release", bp.pk),
        {"decision": "approve", "comment": "", "value__environment": "staging"},
    ).content.decode()
    changes = section(confirm, "bpm-answer-changes")
    cells = dict(
        re.findall(r'<tr data-bpm-change="([^"]*)">\s*<th>[^<]*</th>(.*?)</tr>', changes, re.S)
    )

    assert re.sub(r">\s+<", "><", cells["Notify the team"].strip()) == (
        '<td><del class="bpm-diff__old"><code>true</code></del></td>'
        '<td><ins class="bpm-diff__new"><code>false</code></ins></td>'
    )
    assert "&quot;prod&quot;" in cells["environment"]
    assert "&quot;staging&quot;" in cells["environment"]
    assert "True" not in changes and "False" not in changes
    assert confirm.index('id="bpm-answer-changes"') < confirm.index('id="bpm-result-preview"')


def test_a_value_left_out_or_added_says_so_not_null(reviewer_browser, make_breakpoint):
    """A proposal without a form is edited as JSON: a value taken out is "left out" and a
    new one "not proposed", which null is not."""
    bp = make_breakpoint(
        payload={
            "question": "Run it?",
            "title": "Run",
            "proposal": {"sql": "select 1", "limit": 10},
        }
    )

    confirm = reviewer_browser.post(
        action_url("release", bp.pk),
        {"decision": "approve", "comment": "", "values_json": '{"sql": "select 1", "dry": null}'},
    ).content.decode()
    changes = section(confirm, "bpm-answer-changes")
    rows = dict(re.findall(r'<tr data-bpm-change="([^"]*)">(.*?)</tr>', changes, re.S))

    assert list(rows) == ["dry", "limit"]
    assert '<span class="bpm-diff__none">not proposed</span>' in rows["dry"]
    assert '<ins class="bpm-diff__new"><code>null</code></ins>' in rows["dry"]
    assert '<del class="bpm-diff__old"><code>10</code></del>' in rows["limit"]
    assert '<span class="bpm-diff__none">left out</span>' in rows["limit"]
