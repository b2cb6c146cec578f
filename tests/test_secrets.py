"""Account secrets at rest: encrypted with the configured key, and an operator told what to do
when the key is missing, malformed or not the one the secrets were written with."""

from __future__ import annotations

import base64

import pytest
from cryptography.fernet import Fernet

from crawlsched.errors import SecretKeyInvalid, SecretKeyMissing
from crawlsched.resources.secrets import SecretBox, generate_key


def test_generated_key_is_a_fernet_key_and_never_repeats():
    keys = {generate_key() for _ in range(20)}
    assert len(keys) == 20
    for key in keys:
        assert isinstance(key, str) and len(base64.urlsafe_b64decode(key)) == 32


def test_secret_round_trips_and_is_not_stored_in_clear():
    box = SecretBox(generate_key())
    token = box.encrypt("hunter2 ü")
    assert isinstance(token, str) and "hunter2" not in token
    assert box.decrypt(token) == "hunter2 ü"
    # Fresh randomness each time: two accounts with one password do not look alike at rest.
    assert box.encrypt("hunter2 ü") != token


def test_token_is_readable_with_the_key_alone():
    # Another process (a worker) given the same key reads what the CLI wrote.
    key = generate_key()
    token = SecretBox(key).encrypt("pw")
    assert Fernet(key.encode()).decrypt(token.encode()) == b"pw"
    assert SecretBox(key).decrypt(token) == "pw"


def test_empty_secret_is_refused_before_any_key_is_needed():
    with pytest.raises(ValueError, match=r"^an account secret must not be empty$") as refused:
        SecretBox(None).encrypt("")
    assert not isinstance(refused.value, SecretKeyMissing)


@pytest.mark.parametrize("key", [None, ""])
def test_no_key_refuses_both_directions(key):
    box = SecretBox(key)  # building it is fine: only what touches a secret needs the key
    with pytest.raises(SecretKeyMissing, match="CRAWLSCHED_SECRET_KEY is not set"):
        box.encrypt("pw")
    with pytest.raises(SecretKeyMissing):
        box.decrypt(SecretBox(generate_key()).encrypt("pw"))


@pytest.mark.parametrize(
    "key", ["not-a-key", "a" * 43, base64.urlsafe_b64encode(b"x" * 31).decode()]
)
def test_malformed_key_is_refused_at_once_with_what_to_do(key):
    with pytest.raises(SecretKeyInvalid) as refused:
        SecretBox(key)
    assert str(refused.value) == (
        "CRAWLSCHED_SECRET_KEY is not a valid key (32 url-safe base64-encoded bytes); "
        "create one with `crawlsched accounts keygen`"
    )
    assert refused.value.__suppress_context__  # one line: no Fernet traceback under it


def test_wrong_key_says_it_is_not_the_key_the_secrets_were_written_with():
    token = SecretBox(generate_key()).encrypt("pw")
    with pytest.raises(SecretKeyInvalid) as refused:
        SecretBox(generate_key()).decrypt(token)
    assert str(refused.value) == (
        "CRAWLSCHED_SECRET_KEY does not decrypt the stored account secrets: it is not the key "
        "they were written with"
    )
    assert refused.value.__suppress_context__
