from django.apps import AppConfig


class BreakpointsConfig(AppConfig):
    name = "breakpoints"
    verbose_name = "Breakpoints"

    def ready(self) -> None:
        # Here, not at the top: this module is imported while the app registry is filled,
        # before any model may be imported (tests/test_structure.py allows exactly these).
        from audit.services import rule_event_record
        from breakpoints.rule_replay import rule_replay
        from breakpoints.selectors import consecutive_approvals
        from policies.autoapproval import decision_history_register
        from policies.replay import replay_register
        from policies.ruleaudit import rule_audit_register
        from web.api import schema  # noqa: F401 - registers the OpenAPI auth scheme

        decision_history_register(consecutive_approvals)
        rule_audit_register(rule_event_record)
        replay_register(rule_replay)
