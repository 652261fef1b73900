import Foundation
import MiniFlake
import Testing

@testable import NoteSim

/// What a recorded run holds for its report: every point a note was touched, on every lane, with its text there.
@Suite struct RunRecordingTests {
    /// Device 0 writes a note and pushes it; device 1 (same account) pulls it, edits it and pushes; device 0 pulls the
    /// edit. The note's history is every one of those points, each with the text the lane held after it.
    @Test func aNoteIsFollowedFromDeviceToServerToDevice() async throws {
        let steps: [SimAction] = [
            .signIn(device: 0, account: 0, faults: []), .signIn(device: 1, account: 0, faults: []),
            .create(device: 0, token: "alpha"), .sync(device: 0, faults: []),
            .sync(device: 1, faults: []), .edit(device: 1, note: 0, op: .append(token: "beta")), .sync(device: 1, faults: []),
            .sync(device: 0, faults: []),
        ]
        // A plaintext account, so the texts are the tokens (an encrypted one's are canary words: CanaryTests).
        let parameters = SimParameters(seed: 1, accounts: 1, devices: 2, steps: steps.count, faultRate: 0, encryptedShare: 0)
        let outcome = try await Simulation.run(steps, parameters: parameters, recordEvents: true)
        #expect(outcome.violation == nil)
        let recording = try #require(outcome.recording)
        let note = try #require(recording.notes.firstIndex { $0.label == "alpha" })
        #expect(recording.notes[note].originDevice == 0)
        let history = recording.touches.filter { $0.note == note }.map { touch in
            "\(touch.step) \(touch.lane < 0 ? "server" : "device \(touch.lane)"): \(Self.names(touch.kinds)) \(recording.texts[touch.text].debugDescription)"
        }
        #expect(
            history == [
                #"2 device 0: created "alpha\n""#,
                #"3 server: stored "alpha\n""#,
                #"3 device 0: pushed "alpha\n""#,
                #"4 device 1: pulled "alpha\n""#,
                #"5 device 1: edited "alpha\nbeta\n""#,
                #"6 server: changed "alpha\nbeta\n""#,
                #"6 device 1: pushed "alpha\nbeta\n""#,
                #"7 device 0: pulled "alpha\nbeta\n""#,
            ], "\(history)")
        // The sync arrows: device 0's first sync pushed one change and pulled it back.
        let first = try #require(recording.exchanges.first { $0.step == 3 })
        #expect(first.device == 0 && first.pushRequests == 1 && first.pushed == 1 && first.pullPages >= 1 && first.account == 0)
        // Both devices signed in to account 0 at steps 0 and 1, and stayed.
        #expect(recording.accountChanges.filter { $0.account >= 0 }.map { [$0.device, $0.step, $0.account] } == [[0, 0, 0], [1, 1, 0]])
        // Series run to quiescence (the step after the last).
        #expect(recording.serverNotes.count == steps.count + 1 && recording.serverNotes.last == 1)
        #expect(recording.pending.map(\.last) == [0, 0])
    }

    /// A sign-in to another account sets the first account's notes aside; signing back in restores them.
    @Test func aSignInToAnotherAccountSetsNotesAsideAndBandsChange() async throws {
        let steps: [SimAction] = [
            .signIn(device: 0, account: 0, faults: []), .create(device: 0, token: "mine"), .sync(device: 0, faults: []),
            .signIn(device: 0, account: 1, faults: []), .signIn(device: 0, account: 0, faults: []),
        ]
        let parameters = SimParameters(seed: 2, accounts: 2, devices: 1, steps: steps.count, faultRate: 0)
        let outcome = try await Simulation.run(steps, parameters: parameters, recordEvents: true)
        #expect(outcome.violation == nil)
        let recording = try #require(outcome.recording)
        let note = try #require(recording.notes.firstIndex { $0.label == "mine" })
        let onDevice = recording.touches.filter { $0.note == note && $0.lane == 0 }
        #expect(onDevice.map { Self.names($0.kinds) } == ["created", "pushed", "set aside", "restored"])
        #expect(onDevice[2].state & TouchState.setAside != 0 && onDevice[3].state & TouchState.setAside == 0)
        #expect(recording.accountChanges.map { [$0.step, $0.account] } == [[0, -1], [0, 0], [3, 1], [4, 0]])
    }

    /// Recording reads only: the same seeds give the same summaries and outcomes with and without it.
    @Test func recordingDoesNotChangeTheRun() async throws {
        for seed: UInt64 in 1...3 {
            let parameters = SimParameters(seed: seed, accounts: 2, devices: 3, steps: 150, faultRate: 0.1, watchers: 1)
            let schedule = ScheduleGenerator.generate(parameters)
            let plain = try await Simulation.run(schedule, parameters: parameters)
            let recorded = try await Simulation.run(schedule, parameters: parameters, recordEvents: true)
            #expect(plain.summary == recorded.summary, "seed \(seed)")
            #expect(plain.violation == recorded.violation, "seed \(seed)")
            #expect(plain.recording == nil)
            let recording = try #require(recorded.recording)
            #expect(recording.serverNotes.count == schedule.count + 1 && recording.serverNotes.last == recorded.summary.notes, "seed \(seed)")
            #expect(recording.conflicts.last == recorded.summary.conflicts && recording.faults.last == recorded.summary.faults)
        }
    }

    static func names(_ kinds: TouchKinds) -> String {
        TouchKinds.names.indices.filter { kinds.contains(TouchKinds(rawValue: 1 << $0)) }.map { TouchKinds.names[$0] }.joined(separator: ", ")
    }
}
