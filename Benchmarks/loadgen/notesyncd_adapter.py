"""notesyncd adapter for the shared note-sync workload (../../../shared/bench/kinto/workload.py).

Load it with:  workload.py --adapter-file Benchmarks/loadgen/notesyncd_adapter.py:NotesyncdAdapter --url http://127.0.0.1:PORT

Each timed call is ONE HTTP request, as the workload's contract requires:
  push      -> POST /v1/notes/push with one NoteChange per note (new client IDs minted here as MiniFlake values)
  update    -> POST /v1/notes/push with serverID + baseVersion (fast-forward edits)
  pull_page -> GET  /v1/notes/changes?since=CURSOR&limit=N
account() signs up and signs in (untimed), like the Kinto adapter's collection setup.

The adapter learns server IDs and versions from its own pushes and from pulls, so update() sends a fast-forward
edit (baseVersion = the version it last saw). Store growth (workload.py --big-store without --seed-cmd) goes through
push() like every other push: batches of --push-batch notes over the real API, each one acknowledged after its
fsync. With NOTESYNCD_BENCH_URLS=URL1,URL2,... (run.sh DAEMONS=N) accounts are spread round-robin over several
daemons sharing one database; each account stays on its daemon.
"""

from __future__ import annotations

import os
import random
import threading
import time
import urllib.parse

from workload import Adapter, Http, HttpError

EPOCH_MS = 1_519_862_400_000


class FlakeMinter:
    """MiniFlake IDs: (ms since 2018-03-01 << 22) | (sequence << 10) | instance. Thread-safe.

    Like the reference client's generator: up to 4096 IDs per millisecond, then the next millisecond is borrowed.
    `take(n)` mints n IDs under one lock (a push mints two per note: client ID and edit ID)."""

    def __init__(self, instance: int):
        self.instance = instance & 1023
        self.last_ms = -1
        self.seq = -1
        self.lock = threading.Lock()

    def take(self, n: int) -> list[str]:
        out = []
        with self.lock:
            now = int(time.time() * 1000) - EPOCH_MS
            if now > self.last_ms:
                self.last_ms, self.seq = now, -1
            ms, seq, inst = self.last_ms, self.seq, self.instance
            for _ in range(n):
                seq += 1
                if seq > 4095:
                    ms, seq = ms + 1, 0
                out.append(str((ms << 22) | (seq << 10) | inst))
            self.last_ms, self.seq = ms, seq
        return out

    def next(self) -> str:
        return self.take(1)[0]


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
        # Several daemons on one shared database (run.sh DAEMONS=N): accounts go to them round-robin, and each
        # account keeps its one daemon (and connection) for the whole run.
        urls = [u.strip().rstrip("/") for u in os.environ.get("NOTESYNCD_BENCH_URLS", "").split(",") if u.strip()]
        self.urls = urls or [self.base_url]
        self.next_url = 0
        self.url_lock = threading.Lock()

    def describe(self):
        return {**super().describe(), "daemons": self.urls}

    def account(self, username):
        with self.url_lock:
            url = self.urls[self.next_url % len(self.urls)]
            self.next_url += 1
        http = Http(url, {"Accept": "application/json"})
        user = username.lower().replace("_", "-")[:64]
        try:
            http.request("POST", "/v1/accounts", {"username": user, "password": self.password})
        except HttpError as e:  # already exists (re-run with the same run id)
            if "-> 409" not in str(e):
                raise
        origin = str(random.Random(user).randrange(1, 2**63))
        _, _, out = http.request("POST", "/v1/sessions",
                                 {"username": user, "password": self.password, "deviceName": "workload", "origin": origin})
        http.headers["Authorization"] = "Bearer " + out["token"]
        return Account(http, origin)

    def push(self, acct, notes):
        ids = self.minter.take(2 * len(notes))
        origin = acct.origin
        changes = [{"clientID": ids[2 * i], "origin": origin, "editID": ids[2 * i + 1], "text": note["text"]}
                   for i, note in enumerate(notes)]
        _, _, out = acct.http.request("POST", "/v1/notes/push", {"changes": changes})
        results = out["results"]
        if len(results) != len(changes):
            raise RuntimeError(f"push: {len(results)} results for {len(changes)} changes")
        server_ids = []
        known = acct.notes
        for change, result in zip(changes, results):
            if result["status"] != "created":
                raise RuntimeError(f"push: unexpected result {result}")
            server_id = result["serverID"]
            known[server_id] = [change["clientID"], result["version"]]
            server_ids.append(server_id)
        return server_ids

    def update(self, acct, changes):
        edit_ids = self.minter.take(len(changes))
        body = []
        for (server_id, fields), edit_id in zip(changes, edit_ids):
            client_id, version = acct.notes[server_id]
            body.append({"clientID": client_id, "origin": acct.origin, "serverID": server_id,
                         "editID": edit_id, "text": fields["text"], "baseVersion": version})
        _, _, out = acct.http.request("POST", "/v1/notes/push", {"changes": body})
        for change, result in zip(body, out["results"]):
            if result["status"] != "updated":
                raise RuntimeError(f"update: unexpected result {result}")
            acct.notes[change["serverID"]][1] = result["version"]

    def pull_page(self, acct, cursor, page_token, limit):
        since = page_token or cursor
        path = f"/v1/notes/changes?limit={int(limit)}"
        if since is not None:
            path += "&since=" + urllib.parse.quote(since, safe="")
        _, _, out = acct.http.request("GET", path)
        records = out["changes"]
        known = acct.notes
        for r in records:
            r["id"] = r["serverID"]
            known[r["serverID"]] = [r["clientID"], r["version"]]
        if out["hasMore"]:
            return records, out["cursor"], out["cursor"]
        return records, None, out["cursor"]

    def close(self, acct):
        acct.http.close()
