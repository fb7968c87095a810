"""URLs of the channels' inbound side (mounted at /integrations/ and /decide/)."""

from django.urls import path

from channels.email import views as decide
from channels.jira import views as jira
from channels.slack import views as slack

urlpatterns = [
    path("integrations/slack/interactions", slack.view, name="slack-interactions"),
    path("integrations/jira/webhook", jira.view, name="jira-webhook"),
    path("decide/<str:token>", decide.view, name="email-decide"),
]
