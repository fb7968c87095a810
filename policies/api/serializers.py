"""What the API shows of an auto-approval verdict (a breakpoint's autoApproval, the evaluator)."""

from rest_framework import serializers


class AutoApprovalSerializer(serializers.Serializer):
    recommended = serializers.BooleanField()
    reason = serializers.CharField()
    matchedRule = serializers.CharField(allow_null=True)
    consecutiveApprovals = serializers.IntegerField()
    shadow = serializers.BooleanField(
        required=False,
        help_text="Present (true) only when a shadow rule would have approved what the live "
        "rules left to a person; the breakpoint waits all the same.",
    )
    shadowRules = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="The ids of those shadow rules (present with `shadow`).",
    )
    grantId = serializers.CharField(
        required=False,
        help_text="Present only when a reviewer's grant approved it: the grant's id.",
    )
    grantedBy = serializers.CharField(
        required=False, help_text="Present with grantId: the reviewer who gave the grant."
    )
