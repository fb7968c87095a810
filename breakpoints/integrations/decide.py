"""The decision page behind an email's one-time link (GET shows, POST decides)."""

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt


@csrf_exempt
def view(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
    """Being built (issue 11)."""
    return HttpResponse(status=404)
