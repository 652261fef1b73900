"""Schemathesis hooks for notesyncd (loaded by scripts/schemathesis.sh through SCHEMATHESIS_HOOKS).

Authenticated operations get a fresh bearer token for every request: the run also calls
DELETE /v1/sessions/current, which revokes the token it was sent with, so a cached token would turn later
requests into 401s. Sign-ins are cheap: the daemon runs with --bcrypt-cost 4.

Changing the password and deleting the account get a token of a fresh account of their own (password
OWN_PASSWORD, the documents' example): a wrong password counts against the username's sign-in throttle, which
would soon refuse the shared account's sign-ins, and a right one would change or delete it.
"""
import json
import os
import urllib.request
import uuid

import schemathesis

USERNAME = "schemathesis"
PASSWORD = "correct horse battery"
OWN_PASSWORD = "the password now"
OWN_ACCOUNT_PATHS = {"/v1/account/password", "/v1/account/delete"}


def _post(path: str, body: dict) -> dict:
    request = urllib.request.Request(
        os.environ["NOTESYNCD_URL"] + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


def _sign_in(username: str = USERNAME, password: str = PASSWORD) -> str:
    return _post("/v1/sessions", {"username": username, "password": password})["token"]


def _fresh_account_token() -> str:
    username = "st-" + uuid.uuid4().hex[:20]
    _post("/v1/accounts", {"username": username, "password": OWN_PASSWORD})
    return _sign_in(username, OWN_PASSWORD)


@schemathesis.auth(refresh_interval=None)
class FreshToken:
    def get(self, case, context):
        if case.operation.path in OWN_ACCOUNT_PATHS:
            return _fresh_account_token()
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


_NOTE_ID = None


def _note_id() -> str:
    """The server ID of one note of the shared account (pushed once, tagged and with a second version), so the
    history route is tested on a note it keeps versions of as well as on IDs that name none."""
    global _NOTE_ID
    if _NOTE_ID is None:
        token = _sign_in()

        def push(change: dict) -> dict:
            request = urllib.request.Request(
                os.environ["NOTESYNCD_URL"] + "/v1/notes/push",
                data=json.dumps({"changes": [change]}).encode(),
                headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
                method="POST",
            )
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.load(response)["results"][0]

        created = push({"clientID": "8230134980765482001", "origin": "5044031582654955520",
                        "editID": "8230135127431907328", "text": "schemathesis\n", "deleted": False, "tags": ["work"]})
        push({"clientID": "8230134980765482001", "origin": "5044031582654955520", "serverID": created["serverID"],
              "editID": "8230135127431907329", "text": "schemathesis\nagain\n", "deleted": False, "baseVersion": 1,
              "pinned": True})
        _NOTE_ID = created["serverID"]
    return _NOTE_ID


@schemathesis.hook
def map_path_parameters(context, path_parameters):
    """Points half of the history route's generated note IDs (valid IDs ending in an even digit) at a note the shared
    account holds, so its pages are fetched and checked against the schema, not only its 404s. IDs that are not
    MiniFlake IDs stay as generated, so invalid ones are still refused (400 invalid_id)."""
    value = (path_parameters or {}).get("serverID")
    valid = isinstance(value, str) and value.isascii() and value.isdigit() and value[0] != "0" and int(value) < 2**63
    if valid and int(value[-1]) % 2 == 0:
        path_parameters["serverID"] = _note_id()
    return path_parameters
