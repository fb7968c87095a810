"""What JIRA's issue-with-changelog answer says: status changes by author, in id order."""

from channels.jira.changelog import JiraUser, issue_record


def history(changelog_id, author: dict, *items: dict) -> dict:
    return {"id": changelog_id, "author": author, "items": list(items)}


def status_to(name: str) -> dict:
    return {"field": "status", "fieldId": "status", "fromString": "To Do", "toString": name}


BOB = {"accountId": "acct-bob", "emailAddress": "bob@example.com", "displayName": "Bob"}
MALLORY = {"accountId": "acct-mallory", "displayName": "Mallory"}  # email hidden


def test_status_changes_are_read_in_id_order_with_their_authors():
    answer = {
        "fields": {"status": {"name": "Approved"}},
        "changelog": {
            "histories": [  # JIRA Cloud may page newest first
                history("10010", BOB, status_to("Approved")),
                history(10002, MALLORY, {"field": "labels", "toString": "x"}),
                history("9999", MALLORY, status_to("Rejected")),
            ]
        },
    }

    record = issue_record(answer)

    assert [(c.id, c.to_status, c.author.who) for c in record.changes] == [
        ("9999", "Rejected", "acct-mallory"),
        ("10010", "Approved", "bob@example.com"),
    ]
    assert record.shows("10010") and not record.shows("9999")
    assert record.change("10002") is None  # changed no status


def test_an_issue_that_moved_on_shows_no_earlier_change():
    answer = {
        "fields": {"status": {"name": "To Do"}},
        "changelog": {"histories": [history("5", BOB, status_to("Approved"))]},
    }

    assert not issue_record(answer).shows("5")


def test_anything_else_reads_as_an_empty_record():
    for answer in (None, [], {"fields": "x", "changelog": {"histories": [1, None, {}]}}):
        record = issue_record(answer)
        assert (record.status, record.changes, record.comments) == ("", (), {})


def test_users_are_the_same_by_the_first_identifier_both_have():
    bob = JiraUser(account_id="acct-bob", email="bob@example.com")

    assert bob.same(JiraUser(account_id="acct-bob"))
    assert not bob.same(JiraUser(account_id="acct-mallory", email="bob@example.com"))
    assert bob.same(JiraUser(email="BOB@example.com"))
    assert not bob.same(JiraUser())
