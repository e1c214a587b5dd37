"""core.config.secrets: one scrubbing mechanism for the API key and its masked echoes (issue 12 section 4, issue 20 item 7)."""
from __future__ import annotations

import json

import pytest

from core.config import secrets

KEY = "sk-CANARY-0123456789abcdef3456"


@pytest.mark.parametrize("text, expected", [
    (f"Incorrect API key provided: {KEY}.", "Incorrect API key provided: ***."),
    ("Incorrect API key provided: sk-CANAR******3456.", "Incorrect API key provided: ***."),
    ("key sk-CANA...3456 refused", "key *** refused"),
    ("key sk-CANARYxxxxxxxx3456 refused", "key *** refused"),
    ("prefix only: sk-CANARY-01***", "prefix only: ***"),
    ("another key sk-OTHER******9999 stays", "another key sk-OTHER******9999 stays"),
    ("Bearer " + KEY + KEY, "Bearer ******"),
    ("key 'sk-CANARY-0123456789ab' (cut short)", "key '***' (cut short)"),
    ("key ending 0123456789abcdef3456 refused", "key ending *** refused"),
    ("cut: sk-CANARY-0123456789abcdef345, then more", "cut: ***, then more"),
    ("Bearer sk-CANARY-0123456789abZZZZ", "Bearer ***"),
    ("short runs stay: sk-CANARY-0 and 3456", "short runs stay: sk-CANARY-0 and 3456"),
])
def test_the_key_and_its_masked_forms_are_replaced(text, expected):
    assert secrets.scrub(text, [KEY]) == expected


def test_short_values_are_not_secrets_and_mangle_nothing():
    text = "maximum context length exceeded by model ctx"
    assert secrets.scrub(text, ["x", "ctx", "EMPTY"]) == text
    secrets.register("x")
    assert "x" not in secrets.registered()


def test_registered_secrets_are_scrubbed_everywhere_and_json_stays_valid():
    secrets.register(KEY)
    data = json.dumps({"error": f"ValueError({{'message': 'bad key {KEY}', 'masked': 'sk-CANAR******3456'}})"})
    scrubbed = secrets.scrub(data)
    assert KEY not in scrubbed and "******3456" not in scrubbed
    assert json.loads(scrubbed)["error"].startswith("ValueError(")


def test_words_shared_with_a_password_stay():
    text = "wrong password for user neo4j; authentication failed"
    assert secrets.scrub(text, ["neo4jpassword1"]) == text


def test_non_strings_pass_through():
    assert secrets.scrub(None) is None and secrets.scrub(3) == 3


def test_database_passwords_are_secrets_too():
    from core.config.settings import DatabaseSettings

    DatabaseSettings(mysql_url="mysql://reader:db-Pass-0123456@127.0.0.1:3306", neo4j_password="neo-Pass-98765")
    assert secrets.scrub("login db-Pass-0123456 / neo-Pass-98765 refused") == "login *** / *** refused"
