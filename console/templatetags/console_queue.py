"""{% queue_result_list cl %}: the queue's table, its rows built by console.admin.queue_rows.

The same context and template (admin/change_list_results.html) as the admin's own
{% result_list cl %}, whose per-cell work (a field lookup, a checkbox widget rendered
through the template engine, the preserved filters parsed again for every row's link) was
the larger part of a queue page's time.
"""

from django import template
from django.contrib.admin.templatetags import admin_list
from django.contrib.admin.templatetags.base import InclusionAdminNode

from console.admin import queue_rows

register = template.Library()


def queue_result_list(cl) -> dict:
    if cl.formset is not None or cl.is_popup:  # never the queue's case: the stock rows
        return admin_list.result_list(cl)
    headers = list(admin_list.result_headers(cl))
    return {
        "cl": cl,
        "result_hidden_fields": [],
        "result_headers": headers,
        "num_sorted_fields": sum(1 for h in headers if h["sortable"] and h["sorted"]),
        "results": queue_rows(cl),
    }


@register.tag(name="queue_result_list")
def queue_result_list_tag(parser, token):
    return InclusionAdminNode(  # type: ignore[call-arg]  # as admin_list's tags call it
        parser,
        token,
        func=queue_result_list,
        template_name="change_list_results.html",
        takes_context=False,
    )
