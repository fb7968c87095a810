"""The JIRA webhook (POST /integrations/jira/webhook)."""

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt


@csrf_exempt
def view(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
    """Being built (issue 11)."""
    return HttpResponse(status=404)
