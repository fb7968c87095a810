from django.apps import AppConfig


class ChannelsConfig(AppConfig):
    name = "channels"
    verbose_name = "Channels"

    def ready(self) -> None:
        # Here, not at the top: this module is imported while the app registry is filled,
        # before any model may be imported (tests/test_structure.py allows exactly these).
        from channels.email import messages as email
        from channels.jira import issues as jira
        from channels.slack import messages as slack
        from core.choices import Channel
        from notifications.senders import register

        register(Channel.SLACK, slack.send)
        register(Channel.EMAIL, email.send)
        register(Channel.JIRA, jira.send)
