"""The console's forms: a comment, a release decision, a reason to expire or cancel."""

from typing import Any, cast

from django import forms

APPROVE = "approve"
REJECT = "reject"
OPTION_PREFIX = "option:"


class CommentForm(forms.Form):
    """A reviewer's comment (alone, it is what "Always approve" sends with the approval)."""

    comment = forms.CharField(
        required=False,
        strip=True,
        max_length=20_000,
        widget=forms.Textarea(
            attrs={"rows": 5, "placeholder": "Feedback for the agent (required to reject)"}
        ),
    )

    def clean_comment(self) -> str:
        # Browsers submit textarea line breaks as CRLF; the agent gets plain "\n".
        return self.cleaned_data["comment"].replace("\r\n", "\n").replace("\r", "\n")


class DecisionForm(CommentForm):
    """A reviewer's comment and, for a release, the decision: approve, reject or an option."""

    decision = forms.ChoiceField(widget=forms.RadioSelect, required=True)

    def __init__(self, *args: Any, options: list[str] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.options = list(options or [])
        choices = [(f"{OPTION_PREFIX}{i}", option) for i, option in enumerate(self.options)]
        choices += [(APPROVE, "Approve"), (REJECT, "Reject with feedback")]
        cast(forms.ChoiceField, self.fields["decision"]).choices = choices

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if data.get("decision") == REJECT and not data.get("comment"):
            self.add_error("comment", "Tell the agent why: rejecting needs feedback.")
        return data

    @property
    def approved(self) -> bool:
        return self.cleaned_data["decision"] != REJECT

    @property
    def option(self) -> str | None:
        decision = self.cleaned_data["decision"]
        if decision.startswith(OPTION_PREFIX):
            return self.options[int(decision.removeprefix(OPTION_PREFIX))]
        return None

    @property
    def decision_label(self) -> str:
        if self.option is not None:
            return f"Choose option “{self.option}”"
        return "Approve" if self.approved else "Reject"

    @property
    def send_label(self) -> str:
        """The confirmation's button: what it sends ("Send rejection", not "Confirm")."""
        if self.option is not None:
            return f"Send option “{self.option}”"
        return "Send approval" if self.approved else "Send rejection"

    @property
    def outcome(self) -> str:
        if self.option is not None:
            return f"option “{self.option}” chosen"
        return "approved" if self.approved else "rejected"


class ReasonForm(forms.Form):
    """Why an admin expires or cancels: the agent reads it as result.feedback."""

    reason = forms.CharField(
        required=False,
        max_length=2000,
        widget=forms.TextInput(attrs={"placeholder": "Optional: why, for the agent"}),
    )
