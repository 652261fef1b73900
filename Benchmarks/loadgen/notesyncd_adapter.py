"""notesyncd adapter for the shared note-sync workload (../../../shared/bench/kinto/workload.py).

Load it with:  workload.py --adapter-file Benchmarks/loadgen/notesyncd_adapter.py:NotesyncdAdapter --url http://127.0.0.1:PORT

Each timed call is ONE HTTP request, as the workload's contract requires:
  push      -> POST /v1/notes/push with one NoteChange per note (new client IDs minted here as MiniFlake values)
  update    -> POST /v1/notes/push with serverID + baseVersion (fast-forward edits)
  pull_page -> GET  /v1/notes/changes?since=CURSOR&limit=N
account() signs up and signs in (untimed), like the Kinto adapter's collection setup.
"""

from __future__ import annotations

import os
import random
import threading
import time
import urllib.parse

from workload import Adapter, Http

EPOCH_MS = 1_519_862_400_000


class FlakeMinter:
    """MiniFlake IDs: (ms since 2018-03-01 << 22) | (sequence << 10) | instance. Thread-safe."""

    def __init__(self, instance: int):
        self.instance = instance & 1023
        self.last_ms = -1
        self.seq = 0
        self.lock = threading.Lock()

    def next(self) -> str:
        with self.lock:
            now = int(time.time() * 1000) - EPOCH_MS
            if now > self.last_ms:
                self.last_ms, self.seq = now, 0
            else:
                self.seq += 1
                if self.seq > 4095:
                    self.last_ms, self.seq = self.last_ms + 1, 0
            return str((self.last_ms << 22) | (self.seq << 10) | self.instance)


class Account:
    def __init__(self, http: Http, origin: str):
        self.http = http
        self.origin = origin
        # server ID -> [client ID, version]; filled by push results and pulls, used by update().
        self.notes: dict[str, list] = {}


class NotesyncdAdapter(Adapter):
    name = "notesyncd"

    def __init__(self, base_url, options):
        super().__init__(base_url.rstrip("/"), options)
        self.minter = FlakeMinter(random.Random(os.getpid()).randrange(1024))
        self.password = "bench-password"

    def account(self, username):
        http = Http(self.base_url, {"Accept": "application/json"})
        user = username.lower().replace("_", "-")[:64]
        try:
            http.request("POST", "/v1/accounts", {"username": user, "password": self.password})
        except Exception as e:  # already exists (re-run with the same run id)
            if "409" not in str(e):
                raise
        origin = str(random.Random(user).randrange(1, 2**63))
        _, _, out = http.request("POST", "/v1/sessions",
                                 {"username": user, "password": self.password, "deviceName": "workload", "origin": origin})
        http.headers["Authorization"] = "Bearer " + out["token"]
        return Account(http, origin)

    def push(self, acct, notes):
        changes = []
        for _ in notes:
            changes.append({"clientID": self.minter.next(), "origin": acct.origin, "editID": self.minter.next()})
        for change, note in zip(changes, notes):
            change["text"] = note["text"]
        _, _, out = acct.http.request("POST", "/v1/notes/push", {"changes": changes})
        ids = []
        for change, result in zip(changes, out["results"]):
            if result["status"] != "created":
                raise RuntimeError(f"push: unexpected result {result}")
            acct.notes[result["serverID"]] = [change["clientID"], result["version"]]
            ids.append(result["serverID"])
        return ids

    def update(self, acct, changes):
        body = []
        for server_id, fields in changes:
            client_id, version = acct.notes[server_id]
            body.append({"clientID": client_id, "origin": acct.origin, "serverID": server_id,
                         "editID": self.minter.next(), "text": fields["text"], "baseVersion": version})
        _, _, out = acct.http.request("POST", "/v1/notes/push", {"changes": body})
        for change, result in zip(body, out["results"]):
            if result["status"] != "updated":
                raise RuntimeError(f"update: unexpected result {result}")
            acct.notes[change["serverID"]][1] = result["version"]

    def pull_page(self, acct, cursor, page_token, limit):
        since = page_token or cursor
        query = {"limit": str(limit)}
        if since is not None:
            query["since"] = since
        _, _, out = acct.http.request("GET", "/v1/notes/changes?" + urllib.parse.urlencode(query))
        records = out["changes"]
        for r in records:
            r["id"] = r["serverID"]
            acct.notes[r["serverID"]] = [r["clientID"], r["version"]]
        if out["hasMore"]:
            return records, out["cursor"], out["cursor"]
        return records, None, out["cursor"]

    def close(self, acct):
        acct.http.close()
