"""How much work a form's schema can make of one answer, counted before any answer comes.

jsonschema applies every subschema a keyword names: `allOf`, `anyOf`, `oneOf`, `not`,
`if`/`then`/`else`, `dependentSchemas` and `$ref` to the same value ("in place"), and
`properties`, `items`, `prefixItems`, `additionalProperties`, `contains`,
`propertyNames` and `unevaluated*` to the values one level below. A `$defs` node holding
`"allOf": [{"$ref": "#/$defs/n"}]` K times below a field applies itself K times at each
level: K**16 schemas for an answer nested 16 deep (K=4: about a day of checking).

`expansion_problem` counts, for every schema and every depth up to MAX_VALUES_DEPTH, the
schemas applied along one path of an answer that deep (taking at each level the costliest
field, so the count is an upper bound), and refuses a form past MAX_FORM_EXPANSION, or one
that applies itself in place without end. The checking itself also spends a budget
(breakpoints.payload.form_schema.Budget): the count bounds the form, the budget bounds each check.
"""

from collections.abc import Iterator, Mapping
from typing import Any

from core import limits

_IN_PLACE_LISTS = ("allOf", "anyOf", "oneOf")
_IN_PLACE_ONE = ("not", "if", "then", "else")
_BELOW_ONE = (
    "additionalProperties",
    "items",
    "additionalItems",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
)
_DEFS_PREFIX = "#/$defs/"


def _mappings(value: Any) -> Iterator[Mapping[str, Any]]:
    """The schemas (objects; a boolean schema costs nothing worth counting) in `value`."""
    items = value if isinstance(value, list) else [value]
    yield from (item for item in items if isinstance(item, Mapping))


def _map_values(value: Any) -> Iterator[Any]:
    return iter(value.values()) if isinstance(value, Mapping) else iter(())


class _Graph:
    """The form's schemas as nodes (by identity), with what each applies in place and
    below; every `$ref` a creation check has already limited to '#' or '#/$defs/<name>'."""

    def __init__(self, form: Mapping[str, Any]) -> None:
        self.form = form
        found = form.get("$defs")
        self.defs: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        self.nodes: dict[int, Mapping[str, Any]] = {}
        self.in_place: dict[int, list[int]] = {}
        self.below: dict[int, list[int]] = {}
        self._add_all()

    def _add_all(self) -> None:
        pending = [self.form]
        while pending:
            node = pending.pop()
            if id(node) in self.nodes:
                continue
            self.nodes[id(node)] = node
            in_place, below = list(self._in_place_of(node)), list(self._below_of(node))
            self.in_place[id(node)] = [id(child) for child in in_place]
            self.below[id(node)] = [id(child) for child in below]
            pending.extend(in_place)
            pending.extend(below)

    def _in_place_of(self, node: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
        for keyword in _IN_PLACE_LISTS + _IN_PLACE_ONE:
            yield from _mappings(node.get(keyword))
        for value in _map_values(node.get("dependentSchemas")):
            yield from _mappings(value)
        ref = node.get("$ref")
        if ref == "#":
            yield self.form
        elif isinstance(ref, str) and ref.startswith(_DEFS_PREFIX):
            yield from _mappings(self.defs.get(ref.removeprefix(_DEFS_PREFIX)))

    def _below_of(self, node: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
        for keyword in _BELOW_ONE:
            yield from _mappings(node.get(keyword))
        yield from _mappings(node.get("prefixItems"))
        for value in _map_values(node.get("properties")):
            yield from _mappings(value)

    def in_place_order(self) -> tuple[list[int], int | None]:
        """The nodes, each after everything it applies in place; or, when a node applies
        itself in place without end (a cycle of $ref, allOf... with no field between),
        ([], one node of that cycle)."""
        order: list[int] = []
        state: dict[int, int] = {}  # 1: being visited, 2: done
        for start in self.nodes:
            if state.get(start):
                continue
            stack = [(start, iter(self.in_place[start]))]
            state[start] = 1
            while stack:
                node, children = stack[-1]
                child = next(children, None)
                if child is None:
                    stack.pop()
                    state[node] = 2
                    order.append(node)
                elif state.get(child) == 1:
                    return [], child
                elif not state.get(child):
                    state[child] = 1
                    stack.append((child, iter(self.in_place[child])))
        return order, None


def _pointers(form: Mapping[str, Any]) -> dict[int, str]:
    """The JSON pointer of each object in the form, by identity."""
    found: dict[int, str] = {}
    pending: list[tuple[str, Any]] = [("", form)]
    while pending:
        at, value = pending.pop()
        if isinstance(value, Mapping):
            found.setdefault(id(value), at)
            pending.extend((f"{at}/{_escape(str(k))}", v) for k, v in value.items())
        elif isinstance(value, list):
            pending.extend((f"{at}/{index}", item) for index, item in enumerate(value))
    return found


def _escape(part: str) -> str:
    return part.replace("~", "~0").replace("/", "~1")


def _widest(graph: _Graph, order: list[int]) -> tuple[int, int]:
    """(schemas applied along the costliest path of an answer MAX_VALUES_DEPTH deep, from
    the form; the first node past MAX_FORM_EXPANSION, or the form's root if none)."""
    limit = limits.MAX_FORM_EXPANSION
    previous: dict[int, int] = {}
    for depth in range(limits.MAX_VALUES_DEPTH + 1):
        current: dict[int, int] = {}
        for node in order:
            cost = 1 + sum(current[child] for child in graph.in_place[node])
            if depth and graph.below[node]:
                cost += max(previous[child] for child in graph.below[node])
            current[node] = min(cost, limit + 1)
            if cost > limit:
                return cost, node
        previous = current
    return previous[id(graph.form)], id(graph.form)


def expansion_problem(form: Mapping[str, Any]) -> str | None:
    """Why checking an answer against `form` could apply too many schemas (its $ref graph
    multiplies at each level, or applies itself in place without end), naming where; or
    None."""
    graph = _Graph(form)
    order, cycle = graph.in_place_order()
    if cycle is not None:
        at = _pointers(form).get(cycle, "")
        return (
            f"{at or '/'}: Applies itself without end ($ref, allOf, anyOf, oneOf... with no "
            "field in between): it could never check an answer."
        )
    cost, node = _widest(graph, order)
    if cost <= limits.MAX_FORM_EXPANSION:
        return None
    at = _pointers(form).get(node, "")
    return (
        f"{at or '/'}: Checking an answer nested {limits.MAX_VALUES_DEPTH} levels deep could "
        f"apply more than {limits.MAX_FORM_EXPANSION:,} schemas along one path: its $ref, "
        "allOf, anyOf and oneOf multiply at each level. Refer to fewer schemas at each level."
    )
