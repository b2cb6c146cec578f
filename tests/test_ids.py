"""Job ids as tagged strings: every id comes back exactly, and a bad one is refused with an
error that quotes only a bounded part of it (ids come from messages and command lines)."""

from __future__ import annotations

import pytest
from bson import ObjectId
from hypothesis import given
from hypothesis import strategies as st

from crawlsched.ids import decode_id, encode_id

ids = st.one_of(
    st.integers(),
    st.text(),
    st.binary(min_size=12, max_size=12).map(ObjectId),
)


@given(ids)
def test_every_id_comes_back_exactly_with_its_type(job_id):
    back = decode_id(encode_id(job_id))
    assert back == job_id and type(back) is type(job_id)


@given(st.text(max_size=2000))
def test_any_text_decodes_or_is_refused_with_a_bounded_message(text):
    try:
        decode_id(text)
    except ValueError as e:
        assert len(str(e)) <= 300


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("abc", "not an encoded id (oid:…, int:… or str:…): 'abc'"),
        ("oid:zz", "bad oid id: 'zz'"),
        ("int:1.5", "bad int id: '1.5'"),
        ("x" * 5000 + ":1", "unknown id kind 'xxx"),
    ],
)
def test_a_bad_id_is_said_as_such(text, said):
    with pytest.raises(ValueError) as refused:
        decode_id(text)
    assert str(refused.value).startswith(said)
    assert "..." in str(refused.value) or len(text) < 80


def test_a_boolean_is_not_a_job_id():
    with pytest.raises(TypeError):
        encode_id(True)
