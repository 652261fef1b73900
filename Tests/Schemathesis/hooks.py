"""Schemathesis hooks for notesyncd (loaded by scripts/schemathesis.sh through SCHEMATHESIS_HOOKS).

Authenticated operations get a fresh bearer token for every request: the run also calls
DELETE /v1/sessions/current, which revokes the token it was sent with, so a cached token would turn later
requests into 401s. Sign-ins are cheap: the daemon runs with --bcrypt-cost 4.
"""
import json
import os
import urllib.request

import schemathesis

USERNAME = "schemathesis"
PASSWORD = "correct horse battery"


def _sign_in() -> str:
    request = urllib.request.Request(
        os.environ["NOTESYNCD_URL"] + "/v1/sessions",
        data=json.dumps({"username": USERNAME, "password": PASSWORD}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)["token"]


@schemathesis.auth(refresh_interval=None)
class FreshToken:
    def get(self, case, context):
        return _sign_in()

    def set(self, case, data, context):
        case.headers = case.headers or {}
        case.headers["Authorization"] = f"Bearer {data}"


@schemathesis.hook
def map_query(context, query):
    """Keeps waiting pulls short: a generated `wait` above 1 second becomes 1, so a pull that finds no change is
    held for about a second instead of up to 55 (the server answers the same page either way). Values that are not
    integers stay as generated, so invalid ones are still refused (400 invalid_wait)."""
    if query and isinstance(query.get("wait"), int) and not isinstance(query.get("wait"), bool) and query["wait"] > 1:
        query["wait"] = 1
    return query
