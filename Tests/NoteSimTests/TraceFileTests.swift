import ArgumentParser
import Foundation
import Testing

@testable import NoteSim

/// `--replay FILE`: a trace written by `--trace-out` comes back step for step; a file that is not one this notes-sim
/// can replay (an older notes-sim's steps, or not a trace) is a setup error (exit status 2), not a violation (1).
@Suite("notes-sim trace files")
struct TraceFileTests {
    func write(_ text: String) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("trace-\(UUID().uuidString).json")
        try Data(text.utf8).write(to: url)
        return url
    }

    func exitStatus(_ body: () throws -> Void) -> Int32? {
        do {
            try body()
            return nil
        } catch let exit as ExitCode {
            return exit.rawValue
        } catch {
            return -1
        }
    }

    @Test func aWrittenTraceReplaysStepForStep() throws {
        let steps: [SimAction] = [
            .create(device: 0, token: "t1"), .signIn(device: 0, account: 1, faults: [], carry: true), .restartServer,
        ]
        let data = try JSONEncoder().encode(
            Trace(seed: 7, parameters: SimParameters(seed: 7), violation: "no-duplicates", steps: steps))
        let url = try write(String(decoding: data, as: UTF8.self))
        defer { try? FileManager.default.removeItem(at: url) }
        #expect(try NoteSimCommand.readTrace(url.path) == steps)
    }

    @Test func anOlderTraceOrAnotherFileIsASetupError() throws {
        // A sign-in step as notes-sim wrote it before issue 16 (no carry choice).
        let older = try write(
            #"{"seed":1,"parameters":{"seed":1,"accounts":2,"devices":3,"steps":300,"faultRate":0.05},"violation":"x","steps":[{"signIn":{"device":0,"account":1,"faults":[]}}]}"#)
        let garbage = try write("not json")
        defer {
            try? FileManager.default.removeItem(at: older)
            try? FileManager.default.removeItem(at: garbage)
        }
        #expect(exitStatus { _ = try NoteSimCommand.readTrace(older.path) } == 2)
        #expect(exitStatus { _ = try NoteSimCommand.readTrace(garbage.path) } == 2)
        #expect(exitStatus { _ = try NoteSimCommand.readTrace("/nonexistent/trace.json") } == 2)
    }
}
