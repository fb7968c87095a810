"""breakpoints.answers.outcome: how a breakpoint ended, read once for every channel."""

from breakpoints.answers.outcome import outcome_of


def test_a_release_is_approved_or_rejected_by_whoever_answered():
    approved = outcome_of("released", {"approved": True, "respondedBy": "alice", "option": "Ship"})
    rejected = outcome_of("released", {"approved": False, "respondedBy": ["bob", "carol"]})

    assert (approved.verdict, approved.by, approved.option) == ("Approved", "alice", "Ship")
    assert (rejected.verdict, rejected.by, rejected.option) == ("Rejected", "bob, carol", "")
    assert approved.released and rejected.released


def test_an_ending_without_a_decision_is_named_by_its_status():
    expired = outcome_of("expired", {"approved": False, "feedback": "No answer in time."})

    assert expired.verdict == "Expired"
    assert not expired.released and not expired.approved
    assert expired.feedback == "No answer in time."


def test_a_missing_or_malformed_result_reads_as_nothing_said():
    outcome = outcome_of("cancelled", None)

    assert (outcome.verdict, outcome.by, outcome.option, outcome.feedback) == (
        "Cancelled",
        "",
        "",
        "",
    )
    assert outcome_of("released", {"approved": "yes", "option": 3}).approved is False
    assert outcome_of("released", {"option": 3}).option == ""
