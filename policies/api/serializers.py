"""What the API shows of an auto-approval verdict (a breakpoint's autoApproval, the evaluator)."""

from rest_framework import serializers


class AutoApprovalSerializer(serializers.Serializer):
    recommended = serializers.BooleanField()
    reason = serializers.CharField()
    matchedRule = serializers.CharField(allow_null=True)
    consecutiveApprovals = serializers.IntegerField()
