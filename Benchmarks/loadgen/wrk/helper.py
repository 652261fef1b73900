#!/usr/bin/env python3
"""Untimed setup for the wrk measurements (wrk.sh), over notesyncd's real API (standard library only).

  helper.py URL account NAME            sign up + sign in; prints TOKEN ORIGIN
  helper.py URL seed TOKEN ORIGIN N     pushes N new notes of ~200 bytes in batches of 1,000; prints the count
  helper.py URL modify TOKEN ORIGIN N   full pull, then modifies N random notes in one push; prints the cursor
                                        taken before the push (a pull since it returns exactly those N notes)
"""

import http.client
import json
import random
import sys
import time
import urllib.parse

EPOCH_MS = 1_519_862_400_000
WORDS = ("sync note list task idea draft meeting call buy milk fix bug read book plan trip review code send mail "
         "water plants call mom gym run swift server kinto store pull push merge cursor batch page token offline "
         "device laptop phone tablet backup").split()


class Client:
    def __init__(self, url, token=None):
        u = urllib.parse.urlsplit(url)
        if u.hostname not in ("127.0.0.1", "localhost", "::1"):
            raise SystemExit("loopback only")
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=300)
        self.headers = {"Content-Type": "application/json"}
        if token:
            self.headers["Authorization"] = "Bearer " + token

    def call(self, method, path, body=None, ok=(200, 201)):
        self.conn.request(method, path, body=None if body is None else json.dumps(body), headers=self.headers)
        resp = self.conn.getresponse()
        raw = resp.read()
        if resp.status not in ok:
            raise SystemExit(f"{method} {path} -> {resp.status}: {raw[:300]!r}")
        return json.loads(raw) if raw else None


class Minter:
    def __init__(self):
        self.ms, self.seq, self.instance = -1, -1, random.randrange(1024)

    def take(self, n):
        now = int(time.time() * 1000) - EPOCH_MS
        if now > self.ms:
            self.ms, self.seq = now, -1
        out = []
        for _ in range(n):
            self.seq += 1
            if self.seq > 4095:
                self.ms, self.seq = self.ms + 1, 0
            out.append(str((self.ms << 22) | (self.seq << 10) | self.instance))
        return out


def text(rng):
    words, n = [], 0
    while n < 200:
        w = rng.choice(WORDS)
        words.append(w)
        n += len(w) + 1
    return " ".join(words)[:200]


def main():
    url, cmd, *args = sys.argv[1:]
    rng = random.Random(42)
    if cmd == "account":
        name = args[0]
        c = Client(url)
        c.call("POST", "/v1/accounts", {"username": name, "password": "bench-password"}, ok=(201, 409))
        origin = str(random.randrange(1, 2**63))
        out = c.call("POST", "/v1/sessions", {"username": name, "password": "bench-password",
                                              "deviceName": "wrk", "origin": origin})
        print(out["token"], origin)
    elif cmd == "seed":
        token, origin, n = args[0], args[1], int(args[2])
        c, m = Client(url, token), Minter()
        texts = [text(rng) for _ in range(1000)]
        done = 0
        while done < n:
            k = min(1000, n - done)
            ids = m.take(2 * k)
            body = {"changes": [{"clientID": ids[2 * i], "origin": origin, "editID": ids[2 * i + 1],
                                 "text": texts[(done + i) % 1000]} for i in range(k)]}
            results = c.call("POST", "/v1/notes/push", body)["results"]
            if len(results) != k or any(r["status"] != "created" for r in results):
                raise SystemExit(f"seed: unexpected results {results[:2]}")
            done += k
        print(done)
    elif cmd == "modify":
        token, origin, n = args[0], args[1], int(args[2])
        c, m = Client(url, token), Minter()
        notes, cursor = {}, None
        while True:
            path = "/v1/notes/changes?limit=1000" + (f"&since={cursor}" if cursor else "")
            page = c.call("GET", path)
            for r in page["changes"]:
                notes[r["serverID"]] = r
            cursor = page["cursor"]
            if not page["hasMore"]:
                break
        chosen = rng.sample(sorted(notes), n)
        edits = m.take(n)
        body = {"changes": [{"clientID": notes[s]["clientID"], "origin": notes[s]["origin"], "serverID": s,
                             "editID": e, "text": text(rng), "baseVersion": notes[s]["version"]}
                            for s, e in zip(chosen, edits)]}
        results = c.call("POST", "/v1/notes/push", body)["results"]
        if any(r["status"] != "updated" for r in results):
            raise SystemExit(f"modify: unexpected results {results[:2]}")
        print(cursor)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
