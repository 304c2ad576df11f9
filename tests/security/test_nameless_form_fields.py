"""A multipart form whose field name cannot be read is refused with a 400 and a message, on any
route that takes a post, before the CSRF check reads the form."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("path", ["/play", "/login", "/signup"])
def test_a_nameless_multipart_field_is_a_clear_400(client, path):
    fields = {"category": "random", "\n": ""}  # the line break leaves the part without a name
    response = client.post(path, data=fields, content_type="multipart/form-data")
    assert response.status_code == 400
    assert b"field without a readable name" in response.data


def test_an_ordinary_multipart_form_still_reaches_the_csrf_check(client):
    response = client.post("/play", data={"category": "random"}, content_type="multipart/form-data")
    assert response.status_code == 400  # no token
    assert b"readable name" not in response.data
