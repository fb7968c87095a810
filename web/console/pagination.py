"""A paginator that stops counting: the queue reloads every few seconds on every open console."""

from typing import cast

from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.utils.functional import cached_property

# 10 pages of 25. At a million rows, counting further cost tens of milliseconds a page.
COUNT_CAP = 250


class CappedCountPaginator(Paginator):
    """Counts at most COUNT_CAP rows (COUNT over a LIMITed subquery), not the whole table.

    Past the cap the queue says "250+ breakpoints" and pages up to there; filters and
    search narrow it.
    """

    @cached_property
    def _counted(self) -> int:
        queryset = cast(QuerySet, self.object_list)
        # Only primary keys, no ORDER BY, in the LIMITed subquery: the count needs neither.
        return queryset.order_by().values("pk")[: COUNT_CAP + 1].count()

    @cached_property
    def count(self) -> int:
        return min(self._counted, COUNT_CAP)

    @property
    def count_capped(self) -> bool:
        """More rows match than were counted."""
        return self._counted > COUNT_CAP
