import ArgumentParser
import Foundation
import MiniFlake
import MiniFlakeCommand
import Testing

@Suite("miniflake command")
struct CommandTests {
    /// 2021-11-02T12:12:52.388Z, sequence 0, instance 33.
    let sample = "486508949198077985"

    @Test("Human output: one aligned line with decimal, base32, timestamp, sequence and instance")
    func humanLine() throws {
        let id = try FlakeID(parsing: sample)
        #expect(id.base32 == "0DG3D9Z4G0011")
        #expect(
            MiniFlakeCommand.Decode.humanLine(id)
                == "486508949198077985   0DG3D9Z4G0011  2021-11-02T12:12:52.388Z  sequence    0  instance   33"
        )
        let big = try FlakeID(milliseconds: FlakeID.maxMilliseconds, sequence: 4095, instance: 1023)
        #expect(
            MiniFlakeCommand.Decode.humanLine(big)
                == "9223372036854775807  7ZZZZZZZZZZZZ  2087-11-05T15:47:35.551Z  sequence 4095  instance 1023"
        )
    }

    @Test("JSON output: exactly the keys id, base32, timestamp, milliseconds, sequence, instance")
    func jsonLine() throws {
        let id = try FlakeID(parsing: sample)
        let line = MiniFlakeCommand.Decode.jsonLine(id)
        #expect(
            line == #"{"id":"486508949198077985","base32":"0DG3D9Z4G0011","timestamp":"2021-11-02T12:12:52.388Z","#
                + #""milliseconds":115992772388,"sequence":0,"instance":33}"#
        )
        let object = try #require(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(Set(object.keys) == ["id", "base32", "timestamp", "milliseconds", "sequence", "instance"])
        #expect(object["id"] as? String == sample)
        #expect((object["milliseconds"] as? NSNumber)?.int64Value == id.milliseconds)
        #expect((object["instance"] as? NSNumber)?.intValue == 33)
        // The id field decodes back as a FlakeID.
        struct Row: Decodable { var id: FlakeID }
        #expect(try JSONDecoder().decode(Row.self, from: Data(line.utf8)).id == id)
    }

    @Test("Bad IDs are reported on stderr while the others decode")
    func mixedInput() {
        let output = MiniFlakeCommand.Decode.decode([sample, "xyz", "0dg3d9z4g0011", "-5", "99999999999999999999"], json: false)
        #expect(output.standardOutput.count == 2)
        #expect(output.standardOutput[0] == output.standardOutput[1])
        #expect(
            output.standardError == [
                "miniflake: 'xyz' is not a MiniFlake ID: it is neither a decimal integer nor 13 Crockford base32 characters.",
                "miniflake: '-5' is not a MiniFlake ID: IDs are positive.",
                "miniflake: '99999999999999999999' is not a MiniFlake ID: it is beyond the 64-bit signed range.",
            ]
        )
        #expect(output.failed)
        let good = MiniFlakeCommand.Decode.decode([sample], json: true)
        #expect(!good.failed)
        #expect(good.standardOutput.first?.hasPrefix(#"{"id":"486508949198077985""#) == true)
    }

    @Test("Error lines stay on one line and cut long input")
    func errorLineEscaping() {
        let line = MiniFlakeCommand.Decode.errorLine("a\nb", .malformed("a\nb"))
        #expect(!line.contains("\n"))
        #expect(line.hasPrefix(#"miniflake: 'a\u{a}b' is not a MiniFlake ID"#))
        let long = MiniFlakeCommand.Decode.errorLine(String(repeating: "q", count: 200), .malformed("q"))
        #expect(long.count < 150)
    }

    @Test("decode parses flags and IDs, including ones that look like options")
    func parseDecode() throws {
        let command = try MiniFlakeCommand.parseAsRoot(["decode", "--json", sample, "-5"])
        let decode = try #require(command as? MiniFlakeCommand.Decode)
        #expect(decode.json)
        #expect(decode.ids == [sample, "-5"])
        let plain = try #require(try MiniFlakeCommand.parseAsRoot(["decode"]) as? MiniFlakeCommand.Decode)
        #expect(plain.ids.isEmpty && !plain.json)
    }

    @Test("new validates --instance and --count", arguments: [
        ["new", "--instance", "1024"], ["new", "--instance", "-1"], ["new", "--count", "0"],
        ["new", "--count", "1000001"],
    ])
    func newValidation(arguments: [String]) {
        #expect(throws: (any Error).self) { try MiniFlakeCommand.parseAsRoot(arguments) }
    }

    @Test("new parses its options")
    func parseNew() throws {
        let command = try MiniFlakeCommand.parseAsRoot(["new", "--instance", "1023", "--count", "1000000", "--base32"])
        let new = try #require(command as? MiniFlakeCommand.New)
        #expect(new.instance == 1023 && new.count == 1_000_000 && new.base32)
        let defaults = try #require(try MiniFlakeCommand.parseAsRoot(["new"]) as? MiniFlakeCommand.New)
        #expect(defaults.instance == nil && defaults.count == 1 && !defaults.base32)
    }

    @Test("new renders one ID per line, decimal or base32")
    func renderNew() throws {
        let clock = ManualFlakeClock(unixMilliseconds: 1_795_342_530_123)
        var maker = try FlakeMaker(instance: 6, clock: clock)
        let decimal = try MiniFlakeCommand.New.render(count: 3, base32: false, using: &maker)
        let lines = decimal.split(separator: "\n").map(String.init)
        #expect(decimal.hasSuffix("\n"))
        #expect(lines.count == 3)
        let ids = lines.compactMap(FlakeID.init)
        #expect(ids.count == 3 && ids[0] < ids[1] && ids[1] < ids[2])
        #expect(ids.allSatisfy { $0.instance == 6 && $0.timestamp == "2026-11-22T10:15:30.123Z" })
        let base32 = try MiniFlakeCommand.New.render(count: 2, base32: true, using: &maker)
        let codes = base32.split(separator: "\n")
        #expect(codes.count == 2 && codes.allSatisfy { $0.count == 13 })
        #expect(try FlakeID(parsing: String(codes[0])) > ids[2])
    }
}
