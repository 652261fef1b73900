import Foundation
import MiniFlake
import NotesClient
import Testing
import TestSupport

@Suite("Short IDs and prefixes")
struct ShortIDTests {
    func id(_ text: String) -> FlakeID { try! FlakeID(parsing: text) }

    @Test func shortestUniquePrefixOfAtLeastEight() {
        let a = id("0ABCDEFGH0000")
        let b = id("0ABCDEFGH0001")
        let c = id("0ABCDEFJ00000")
        let d = id("1ZZZZZZZZZZZZ")
        let origin = id("0000000000001")
        let ids = ShortID.assign([(1, a, origin), (2, b, origin), (3, c, origin), (4, d, origin)])
        #expect(ids[1] == "0ABCDEFGH0000")
        #expect(ids[2] == "0ABCDEFGH0001")
        #expect(ids[3] == "0ABCDEFJ")
        #expect(ids[4] == "1ZZZZZZZ")
    }

    @Test func collidingClientIDsGetAnOriginSuffix() {
        let shared = id("0ABCDEFGH0000")
        let ids = ShortID.assign([(1, shared, id("0000000000ABC")), (2, shared, id("00000000000XY")), (3, id("0ZZZZZZZZZZZZ"), id("0000000000001"))])
        #expect(ids[1] == "0ABCDEFGH0000-0ABC")
        #expect(ids[2] == "0ABCDEFGH0000-00XY")
        #expect(ids[3] == "0ZZZZZZZ")
    }

    /// Property: every assigned ID names exactly its note, and is the shortest such prefix of at least 8.
    @Test(arguments: [UInt64(1), 2, 3, 4, 5])
    func assignedIDsAreUniqueAndMinimal(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var keys: [(id: Int64, clientID: FlakeID, origin: FlakeID)] = []
        let base = Int64.random(in: 1 << 59...1 << 61, using: &random)
        for index in 0..<300 {
            // Clustered IDs so prefixes run long; a few exact collisions.
            let raw = index % 50 == 0 && index > 0 ? keys[index - 1].clientID.rawValue : base + Int64.random(in: 0..<(1 << 30), using: &random)
            keys.append((Int64(index), try! FlakeID(validating: raw), try! FlakeID(validating: Int64.random(in: 1...Int64.max, using: &random))))
        }
        let ids = ShortID.assign(keys)
        #expect(Set(ids.values).count == keys.count, "seed \(seed)")
        for key in keys {
            let shown = ids[key.id]!
            let code = shown.split(separator: "-").first.map(String.init)!
            let matching = keys.filter { $0.clientID.base32.hasPrefix(code) }
            if shown.contains("-") {
                #expect(matching.allSatisfy { $0.clientID == key.clientID }, "seed \(seed)")
            } else {
                #expect(matching.count == 1, "seed \(seed): \(shown)")
                if code.count > ShortID.minimumLength {
                    let shorter = String(code.dropLast())
                    #expect(keys.filter { $0.clientID.base32.hasPrefix(shorter) }.count > 1, "seed \(seed): \(shown) is not minimal")
                }
            }
        }
    }

    @Test func prefixParsing() throws {
        let prefix = try #require(ShortID.Prefix("0abc-io"))
        #expect(prefix.code == "0ABC" && prefix.originSuffix == "10")
        #expect(ShortID.Prefix("0aIlO")?.code == "0A110")
        #expect(ShortID.Prefix("") == nil)
        #expect(ShortID.Prefix("0ab!") == nil)
        #expect(ShortID.Prefix("0U") == nil, "U is not base32")
        #expect(ShortID.Prefix("8")?.range == nil, "no positive 64-bit ID starts with 8")
        let range = try #require(ShortID.Prefix("0ABCDEFGH0000")?.range)
        #expect(range == id("0ABCDEFGH0000").rawValue...id("0ABCDEFGH0000").rawValue)
        let decimal = try #require(ShortID.Prefix(id("0ABCDEFGH0000").description))
        #expect(decimal.decimal == id("0ABCDEFGH0000"))
    }

    @Test func resolvingPrefixesAgainstTheStore() throws {
        let clock = ManualFlakeClock(unixMilliseconds: testEpoch)
        let client = try makeDevice(NoNetwork(), seed: 3, clock: clock)
        let a = try client.add("a")
        let b = try client.add("b")  // same millisecond: shares a long prefix with a
        clock.advance(milliseconds: 86_400_000)
        let c = try client.add("c")
        let ids = try client.displayIDs()
        #expect(ids.count == 3)
        for note in [a, b, c] {
            #expect(try client.displayID(of: note) == ids[note.id])
            #expect(try client.note(byPrefix: ids[note.id]!).id == note.id)
            #expect(try client.note(byPrefix: ids[note.id]!.lowercased()).id == note.id, "case-insensitive")
            #expect(try client.note(byPrefix: note.clientID.description).id == note.id, "full decimal")
            #expect(try client.note(byPrefix: note.clientID.base32).id == note.id, "full base32")
        }
        #expect(ids[a.id]!.count > 8 && ids[b.id]!.count > 8, "same-millisecond IDs need more characters")
        #expect(ids[c.id]!.count == 8)

        let common = String(a.clientID.base32.prefix(9))
        #expect { try client.note(byPrefix: common) } throws: { error in
            let error = error as? NotesError
            return error?.code == .ambiguousID && error?.message.contains(ids[a.id]!) == true
        }
        #expect { try client.note(byPrefix: "7ZZZZ") } throws: { ($0 as? NotesError)?.code == .noteNotFound }
        #expect { try client.note(byPrefix: "not-an-id!") } throws: { ($0 as? NotesError)?.code == .invalidID }
        // Deleted notes still resolve (show them, restore them).
        try client.delete(c.id)
        #expect(try client.note(byPrefix: ids[c.id]!).id == c.id)
    }
}
