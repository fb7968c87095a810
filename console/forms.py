"""The console's forms: a comment, a release decision and the grant it may carry, a reason
to expire or cancel."""

from typing import Any, cast

from django import forms
from django.conf import settings

from breakpoints.payload.validation import Option
from core.limits import MAX_COMMENT_LENGTH, MAX_REASON_LENGTH

APPROVE = "approve"
REJECT = "reject"


class CommentForm(forms.Form):
    """A reviewer's comment (alone, it is what "Always approve" sends with the approval)."""

    comment = forms.CharField(
        required=False,
        strip=True,
        max_length=MAX_COMMENT_LENGTH,
        widget=forms.Textarea(
            attrs={"rows": 5, "placeholder": "Feedback for the agent (optional)"}
        ),
    )

    def clean_comment(self) -> str:
        # Browsers submit textarea line breaks as CRLF; the agent gets plain "\n".
        return self.cleaned_data["comment"].replace("\r\n", "\n").replace("\r", "\n")


VERDICT_NOTE = {True: "approves", False: "rejects"}


class DecisionForm(CommentForm):
    """A reviewer's comment and, for a release, the decision: approve or reject, and one of
    payload.options if the agent offered some.

    An option that carries its verdict ({"label": "Hold", "approved": false}) needs no
    approve/reject; whether one that contradicts it is refused is the service's rule
    (release_preview), not the form's: `approved` is None when the reviewer chose neither.
    """

    option = forms.ChoiceField(widget=forms.RadioSelect, required=False)
    decision = forms.ChoiceField(widget=forms.RadioSelect, required=False)

    def __init__(self, *args: Any, options: list[Option] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.options = list(options or [])
        option_field = cast(forms.ChoiceField, self.fields["option"])
        option_field.choices = [("", "No option")] + [
            (str(index), option.label) for index, option in enumerate(self.options)
        ]
        decision_field = cast(forms.ChoiceField, self.fields["decision"])
        decision_field.choices = [(APPROVE, "Approve"), (REJECT, "Reject")]

    def option_choices(self) -> list[dict[str, Any]]:
        """The option radios with each option's verdict, for the template ("rejects")."""
        verdicts = {str(index): option.approved for index, option in enumerate(self.options)}
        choices = []
        for radio in self["option"]:
            verdict = verdicts.get(radio.data["value"])
            choices.append(
                {"radio": radio, "verdict": None if verdict is None else VERDICT_NOTE[verdict]}
            )
        return choices

    @property
    def has_verdict_options(self) -> bool:
        return any(option.approved is not None for option in self.options)

    def clean_option(self) -> Option | None:
        value = self.cleaned_data.get("option")
        return self.options[int(value)] if value else None

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        chosen: Option | None = data.get("option")
        decides = chosen is not None and chosen.approved is not None
        if not data.get("decision") and not decides and "option" not in self.errors:
            self.add_error(
                "decision",
                "Choose Approve or Reject"
                + (f": option “{chosen.label}” does not decide it." if chosen else "."),
            )
        return data

    @property
    def approved(self) -> bool | None:
        """The reviewer's approve/reject, None when they left it to the option's verdict."""
        decision = self.cleaned_data.get("decision")
        return None if not decision else decision == APPROVE

    @property
    def option_label(self) -> str | None:
        chosen: Option | None = self.cleaned_data.get("option")
        return chosen.label if chosen is not None else None

    @property
    def option_value(self) -> str:
        """The posted option radio (an index), to carry through the confirmation."""
        chosen = self.cleaned_data.get("option")
        return str(self.options.index(chosen)) if chosen is not None else ""

    # Labels of a decision whose verdict the service worked out (release_preview).

    def decision_label(self, approved: bool) -> str:
        verb = "Approve" if approved else "Reject"
        if self.option_label is not None:
            return f"{verb} with option “{self.option_label}”"
        return verb

    def send_label(self, approved: bool) -> str:
        """The confirmation's button: what it sends ("Send rejection", not "Confirm")."""
        noun = "approval" if approved else "rejection"
        if self.option_label is not None:
            return f"Send {noun} with option “{self.option_label}”"
        return f"Send {noun}"

    def outcome(self, approved: bool) -> str:
        decided = "approved" if approved else "rejected"
        if self.option_label is not None:
            return f"{decided} with option “{self.option_label}”"
        return decided


# "Approve, and allow this": the console's three grants, each as the API spells it
# (grants.services.grant_spec). A grant always ends, so each has an expiry: "the rest of
# the run" lasts RUN_GRANT_SECONDS (a working day), "the next N calls" the longest a grant
# may last; every expiry is capped by BPM_GRANT_MAX_SECONDS.
GRANT_RUN = "run"
GRANT_HOUR = "hour"
GRANT_CALLS = "calls"
RUN_GRANT_SECONDS = 8 * 60 * 60
HOUR_SECONDS = 60 * 60
MAX_GRANT_USES = 1000
DEFAULT_GRANT_USES = 5


def grant_max_seconds() -> int:
    return int(settings.BPM_GRANT_MAX_SECONDS)


class GrantForm(forms.Form):
    """The grant an approval may carry: none, the rest of this run, one hour, or the next N
    calls. Whether this breakpoint's approval may carry it is the grants service's rule
    (grant_offer_refusal, grant_refusal), never this form's."""

    grant = forms.ChoiceField(widget=forms.RadioSelect, required=False, initial="")
    grant_uses = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_GRANT_USES,
        initial=DEFAULT_GRANT_USES,
        label="Calls",
        widget=forms.NumberInput(
            attrs={
                "min": 1,
                "max": MAX_GRANT_USES,
                "class": "bpm-grant-uses",
                "inputmode": "numeric",  # a phone's keypad of digits
            }
        ),
    )

    def __init__(self, *args: Any, run: bool = True, **kwargs: Any):
        super().__init__(*args, **kwargs)
        choices = [("", "No: approve this one only")]
        if run:
            choices.append((GRANT_RUN, "for the rest of this run"))
        choices += [(GRANT_HOUR, "for 1 hour"), (GRANT_CALLS, "for the next N calls")]
        cast(forms.ChoiceField, self.fields["grant"]).choices = choices

    def clean(self) -> dict[str, Any]:
        super().clean()
        chosen = self.cleaned_data.get("grant")
        if chosen == GRANT_CALLS and self.cleaned_data.get("grant_uses") is None:
            if "grant_uses" not in self.errors:
                self.add_error("grant_uses", f"How many calls: 1 to {MAX_GRANT_USES}.")
        return self.cleaned_data

    @property
    def chosen(self) -> str:
        return self.cleaned_data.get("grant") or ""

    def spec(self) -> dict[str, Any] | None:
        """The chosen grant as feedback_add takes it (`grant=`), or None."""
        cap = grant_max_seconds()
        if self.chosen == GRANT_RUN:
            return {"scope": "run", "expiresInSeconds": min(RUN_GRANT_SECONDS, cap)}
        if self.chosen == GRANT_HOUR:
            return {"scope": "key", "expiresInSeconds": min(HOUR_SECONDS, cap)}
        if self.chosen == GRANT_CALLS:
            uses = self.cleaned_data["grant_uses"]
            return {"scope": "key", "uses": uses, "expiresInSeconds": cap}
        return None


class ReasonForm(forms.Form):
    """Why an admin expires or cancels: the agent reads it as result.feedback."""

    reason = forms.CharField(
        required=False,
        max_length=MAX_REASON_LENGTH,
        widget=forms.TextInput(attrs={"placeholder": "Optional: why, for the agent"}),
    )
