"""web.api.views.validated: a serializer's fields are built once per thread and class, and
each body is validated on its own (nothing of one validation reaches the next)."""

import threading
from types import SimpleNamespace

import pytest
from rest_framework import serializers

from web.api import views
from web.api.fields import StrictBody


class Inner(serializers.Serializer):
    size = serializers.IntegerField(min_value=1)


class Body(StrictBody):
    name = serializers.CharField(max_length=5)
    inner = Inner(required=False)
    tags = serializers.ListField(child=serializers.CharField(), required=False)


def body(data):
    return SimpleNamespace(data=data)


def test_bodies_validated_one_after_another_each_get_their_own_answer():
    assert views.validated(Body, body({"name": "a", "inner": {"size": 2}})) == {
        "name": "a",
        "inner": {"size": 2},
    }
    with pytest.raises(serializers.ValidationError) as refused:
        views.validated(Body, body({"name": "toolong", "inner": {"size": 0}, "extra": 1}))
    assert set(refused.value.detail) == {"name", "inner", "non_field_errors"}  # "extra" too
    # The refusal left nothing behind: a valid body next is valid, with only its values.
    assert views.validated(Body, body({"name": "b", "tags": ["x"]})) == {
        "name": "b",
        "tags": ["x"],
    }


def test_the_fields_are_built_once_per_thread_and_bound_to_each_new_serializer(monkeypatch):
    built = []
    original = Body.get_fields

    def counting(self):
        built.append(threading.get_ident())
        return original(self)

    monkeypatch.setattr(Body, "get_fields", counting)
    monkeypatch.setattr(views, "_fields_built", threading.local())
    seen = []
    original_is_valid = Body.is_valid

    def watching(self, **kwargs):
        seen.append((self, self.fields["name"].parent, self.fields["inner"].parent))
        return original_is_valid(self, **kwargs)

    monkeypatch.setattr(Body, "is_valid", watching)

    views.validated(Body, body({"name": "a"}))
    views.validated(Body, body({"name": "b"}))
    assert len(built) == 1
    for serializer, name_parent, inner_parent in seen:
        assert name_parent is serializer and inner_parent is serializer

    other = threading.Thread(target=views.validated, args=(Body, body({"name": "c"})))
    other.start()
    other.join()
    assert len(built) == 2 and built[0] != built[1]  # another thread: fields of its own
