#!/usr/bin/env python3
"""Writes a `notes export` JSON document with N notes, for seeding a store quickly (`notes import FILE`).

Each note has a title and a few lines of words from a small vocabulary, so common words match many notes; exactly
one note holds the rare word `quetzalcoatl` (what the search benchmark looks for). Each note has 0 to 3 tags of 50
(`topic-00` ... `topic-49`, about 6,000 notes each at 200,000 notes; drawn from a generator of their own, so the
texts are those of the file before tags), and exactly one note has the rare tag `rare-tag`. Deterministic: the same
N gives the same file.

usage: make-export.py N OUT.json
"""
import json
import random
import sys

WORDS = ("meeting notes project plan idea list call email draft review budget travel book recipe garden "
         "shopping milk eggs bread coffee tea report design code bug fix release deploy server client sync "
         "monday tuesday friday weekend family friend doctor school music film walk run train flight hotel").split()


def main():
    count, out = int(sys.argv[1]), sys.argv[2]
    rng = random.Random(17)
    tag_rng = random.Random(31)
    topics = [f"topic-{index:02d}" for index in range(50)]
    origin = 5044031582654955520
    # MiniFlake client IDs: milliseconds since 2018-03-01 << 22 | sequence << 10 | instance; one per millisecond.
    base_ms = 250_000_000_000
    notes = []
    for index in range(count):
        lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 6))).capitalize()]
        for _ in range(rng.randint(1, 5)):
            lines.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))))
        if index == count // 2:
            lines.insert(2, "the feathered serpent quetzalcoatl")
        client_id = ((base_ms + index) << 22) | 7
        note = {"clientID": str(client_id), "origin": str(origin), "text": "\n".join(lines), "conflict": False}
        tags = tag_rng.sample(topics, tag_rng.randint(0, 3))
        if index == count // 3:
            tags.append("rare-tag")
        if tags:
            note["tags"] = tags
        notes.append(note)
    document = {"format": "flakenotes-export", "version": 1, "exportedAt": "2026-11-23T12:00:00.000Z", "notes": notes}
    with open(out, "w") as handle:
        json.dump(document, handle)


if __name__ == "__main__":
    main()
