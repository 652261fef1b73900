import Foundation
import MiniFlake
import NoteSyncProtocol

/// One step of a simulation. Steps are plain data, generated up front from the seed, so that any subsequence of
/// them is again a runnable schedule: that is what lets a failing trace be shortened and replayed. Where a step
/// names a note it names it by an index that is reduced modulo the notes the device holds when the step runs.
public enum SimAction: Codable, Sendable, Equatable {
    /// The device creates a note holding one token line.
    case create(device: Int, token: String)
    /// The device edits one of its live notes.
    case edit(device: Int, note: Int, op: EditOp)
    /// The device deletes one of its live notes.
    case delete(device: Int, note: Int)
    /// The device changes one of its live notes' tags or flags (issue 31).
    case tagNote(device: Int, note: Int, op: TagOp)
    /// Two devices change the tags or flags of the same note (one both hold) before either syncs: the server merges
    /// them three-way (issue 31).
    case concurrentTags(first: Int, second: Int, note: Int, firstOp: TagOp, secondOp: TagOp)
    /// The device syncs; `faults` maps the index of a request within this step to the fault injected on it.
    case sync(device: Int, faults: [FaultPlan])
    /// The device signs out (its notes stay).
    case signOut(device: Int, faults: [FaultPlan])
    /// The device signs in to an account (and syncs, which reconciles). Another account's notes are set aside, the
    /// account's own come back; `carry` adds the notes written while signed out to it (else they are kept aside).
    case signIn(device: Int, account: Int, faults: [FaultPlan], carry: Bool = false)
    /// The device copies one of its live notes into another account it signed in to before (`notes copy`).
    case copy(device: Int, note: Int, account: Int)
    /// The device's clock jumps by this many milliseconds (negative: backward).
    case clockJump(device: Int, milliseconds: Int64)
    /// Two devices edit the same note (one both hold) before either syncs.
    case concurrentEdit(first: Int, second: Int, note: Int, firstOp: EditOp, secondOp: EditOp)
    /// Two devices each create a note with the same client ID (a forced collision: MiniFlake and creation
    /// timestamps at one millisecond; CDCounter by relaunching both devices' apps in one second).
    case collide(first: Int, second: Int, firstToken: String, secondToken: String)
    /// The server restarts (in-process: reopened from its store; over HTTP: the restart command).
    case restartServer
    /// Another device of the account revokes this device's session (`notes devices revoke`) just before the
    /// `atRequest`-th request of a sync this device runs in the same step (after the sync when it makes fewer): the
    /// device learns it at its next request (401) and behaves as signed out, keeping its notes (issue 18).
    case revoke(device: Int, atRequest: Int)
    /// The device deletes the account it is signed in to (`notes account delete`); the username is signed up again at
    /// once (a new, empty account). Every device keeps its notes: the deleting one as notes of no account, the
    /// others, meeting 401 or offline, until they sign in to that username again and find it is another account
    /// (issue 18).
    case deleteAccount(device: Int)
    /// One iteration of a watching device's loop (issue 19): its waiting pull (`wait=`, held open between its
    /// iterations) is answered if its account moved, then the sync the answer asks for runs and a new waiting pull
    /// is held from the new cursor. `fault` is what goes wrong on the feed in this iteration. A device with such
    /// steps is in watch mode: at quiescence it converges through these iterations alone (no `sync` step).
    case watchWake(device: Int, fault: FeedFault?)
    /// The device attaches a file to one of its live notes (issue 33): `file`'s bytes come from its seed, so the
    /// checks can make them again; it is read into the device's chunk cache, and its next sync uploads it.
    case attach(device: Int, note: Int, file: SimFile)
    /// The device takes the `index`-th attachment (modulo their count) off one of its live notes; a no-op without.
    case detach(device: Int, note: Int, index: Int)
    /// The device saves the `index`-th attachment of one of its live notes and compares the bytes with those
    /// attached. With `cutAfter`, the connection goes down before the chunk download after that many (the save
    /// fails mid-file), and the device saves again: the resumed download fetches only what it still lacks.
    case save(device: Int, note: Int, index: Int, cutAfter: Int?)
    /// The device attaches `file` (two or three chunks) to one of its live notes and syncs, and the connection goes
    /// down before the chunk upload after `afterChunks` of them (the sync fails mid-upload, mid-file); then it syncs
    /// again, which resumes: it must send no chunk the server told it it has.
    case cutUpload(device: Int, note: Int, file: SimFile, afterChunks: Int)

    /// The devices the step touches.
    public var devices: [Int] {
        switch self {
        case .create(let d, _), .edit(let d, _, _), .delete(let d, _), .tagNote(let d, _, _), .sync(let d, _), .signOut(let d, _),
            .signIn(let d, _, _, _), .clockJump(let d, _), .copy(let d, _, _), .revoke(let d, _), .deleteAccount(let d), .watchWake(let d, _),
            .attach(let d, _, _), .detach(let d, _, _), .save(let d, _, _, _), .cutUpload(let d, _, _, _):
            [d]
        case .concurrentEdit(let a, let b, _, _, _), .concurrentTags(let a, let b, _, _, _), .collide(let a, let b, _, _): [a, b]
        case .restartServer: []
        }
    }

    /// Whether the step writes notes locally (a `notes` command), which a watching device's local trigger syncs.
    public var writesLocally: Bool {
        switch self {
        case .create, .edit, .delete, .tagNote, .concurrentTags, .copy, .concurrentEdit, .collide, .attach, .detach, .cutUpload: true
        default: false
        }
    }

    /// The devices whose local stores the step may change (a clock jump changes only a clock).
    public var devicesWhoseStoresChange: [Int] {
        if case .clockJump = self { return [] }
        return devices
    }
}

/// A line edit. Every line of a simulated note is a unique token, so the checker can follow each edit.
public enum EditOp: Codable, Sendable, Equatable {
    /// Add a token line at the end.
    case append(token: String)
    /// Insert a token line before line `at` (modulo the line count + 1).
    case insert(at: Int, token: String)
    /// Remove line `at` (modulo the line count); a no-op on an empty note.
    case remove(at: Int)
    /// Replace line `at` with a new token line.
    case replace(at: Int, token: String)
}

/// A change of a note's tags or flags (issue 31). Every tag a step adds is new (`g1`, `g2`, ...), like every line's
/// token, so the checker can follow each one; a concurrent step may add the same tag on both devices, written in two
/// cases (`g7`, `G7`), which must end as one tag.
public enum TagOp: Codable, Sendable, Equatable {
    /// Add this tag.
    case add(tag: String)
    /// Take off the note's tag at `index` (modulo its tag count); a no-op without tags.
    case remove(index: Int)
    /// Pin (true) or unpin it.
    case pin(Bool)
    /// Archive (true) or unarchive it.
    case archive(Bool)
}

/// A file a step attaches (issue 33): `size` bytes drawn from a ``SplitMix64`` seeded with `seed` (see
/// ``bytes``), under a name unique in the run.
public struct SimFile: Codable, Sendable, Equatable {
    public var name: String
    public var seed: UInt64
    public var size: Int

    /// The file's bytes: the generator's words, little-endian, cut at `size`.
    public var bytes: Data {
        var random = SplitMix64(seed: seed)
        let words = (0..<(size + 7) / 8).map { _ in random.next().littleEndian }
        return words.withUnsafeBytes { Data($0.prefix(size)) }
    }
}

/// A transport fault on one request of a step.
public struct FaultPlan: Codable, Sendable, Equatable {
    /// The request's index within the step (0 = its first request).
    public var request: Int
    public var kind: FaultKind
}

/// What goes wrong with a request.
public enum FaultKind: String, Codable, Sendable, CaseIterable {
    /// Lost before the server: nothing happens there.
    case dropRequest
    /// The server commits, then the response is lost.
    case dropResponse
    /// Delivered twice; the client sees the second answer.
    case duplicate
    /// The connection goes down: this request and every later one of the step fail (a sync interrupted mid-page).
    case interrupt
}

/// What goes wrong on a watching device's feed (its waiting pull) in one iteration.
public enum FeedFault: String, Codable, Sendable, CaseIterable {
    /// The connection holding the waiting pull drops: nothing is learned; the next iteration pulls again.
    case dropped
    /// The waiting pull's answer is lost on the way back: the next iteration pulls again from the same cursor,
    /// and must be answered at once.
    case answerLost
    /// The wake-up never comes (the wait runs out as if no commit signalled it): the device pulls again at once
    /// from the same cursor, and that pull must find the change by its re-read.
    case wakeLost
    /// The server restarts while the pull waits: the pull ends (graceful shutdown or a cut connection) and the
    /// device pulls again, from the restarted server.
    case restartWhileWaiting
}

/// The shape of a simulation run.
public struct SimParameters: Codable, Sendable, Equatable {
    public var seed: UInt64
    public var accounts = 2
    public var devices = 3
    public var steps = 300
    /// Probability that any one request of a step gets a fault.
    public var faultRate = 0.05
    /// How every device mints client IDs; nil is MiniFlake without reporting client-ID collisions (the summary
    /// then reads as it always did).
    public var idScheme: IDScheme?
    /// Devices in watch mode (devices 0..<watchers; issue 19): their `watchWake` steps are mixed into the
    /// schedule. Nil or 0: none, and the schedule is the one earlier versions generated for the seed.
    public var watchers: Int?
    /// The share of accounts that are end-to-end encrypted (issue 32), 0...1: see ``encryptedAccounts``. Nil (a trace
    /// written before) or 0: none. The schedule does not depend on it.
    public var encryptedShare: Double? = SimParameters.defaultEncryptedShare
}

extension SimParameters {
    /// Half the accounts, by default.
    public static let defaultEncryptedShare = 0.5

    /// The accounts that are encrypted: `round(share × accounts)` of them, consecutive from account `seed mod
    /// accounts` (wrapping), so that each seed has its mix and, with the default two accounts and share ½, one of
    /// each, which one alternating with the seed. Deterministic per seed; the same for an account index after the
    /// account is deleted and signed up again.
    public var encryptedAccounts: Set<Int> {
        let count = max(1, accounts)
        let encrypted = min(count, Int((min(1, max(0, encryptedShare ?? 0)) * Double(count)).rounded()))
        let first = Int(seed % UInt64(count))
        return Set((0..<encrypted).map { (first + $0) % count })
    }
}

/// Generates a schedule from a seed.
public enum ScheduleGenerator {
    /// The most requests a step may fault on: a sync of the simulation's small stores needs a handful.
    static let faultableRequests = 6

    public static func generate(_ parameters: SimParameters) -> [SimAction] {
        var rng = SplitMix64(seed: parameters.seed)
        var steps: [SimAction] = []
        steps.reserveCapacity(parameters.steps)
        var tokenCounter = 0
        func token() -> String {
            tokenCounter += 1
            return "t\(tokenCounter)"
        }
        func device() -> Int { Int(rng.next() % UInt64(max(1, parameters.devices))) }
        func index() -> Int { Int(rng.next() % 1024) }
        func faults() -> [FaultPlan] {
            guard parameters.faultRate > 0 else { return [] }
            var plans: [FaultPlan] = []
            for request in 0..<faultableRequests where rng.chance(parameters.faultRate) {
                let kind = FaultKind.allCases[Int(rng.next() % UInt64(FaultKind.allCases.count))]
                plans.append(FaultPlan(request: request, kind: kind))
            }
            return plans
        }
        func editOp() -> EditOp {
            switch rng.next() % 10 {
            case 0...3: .append(token: token())
            case 4...5: .insert(at: index(), token: token())
            case 6...7: .replace(at: index(), token: token())
            default: .remove(at: index())
            }
        }
        func clockJump() -> Int64 {
            let minute: Int64 = 60_000
            let magnitudes: [Int64] = [minute, 30 * minute, 24 * 60 * minute, 365 * 24 * 60 * minute, 3 * 365 * 24 * 60 * minute]
            let magnitude = magnitudes[Int(rng.next() % UInt64(magnitudes.count))]
            let amount = Int64(rng.next() % UInt64(magnitude)) + 1
            return rng.chance(0.5) ? -amount : amount
        }
        // Tag steps (issue 31) come from a stream of their own too, on top of `parameters.steps` (which counts the
        // others): after each step, one with probability 0.2, so they are about a sixth of a run, and the other steps
        // are exactly those of a run without them, in the same order. Of them: 35% add a tag, 20% take one off, 10% pin or unpin, 10% archive or unarchive, 25%
        // two devices change the same note's tags before either syncs (a quarter of those add the same tag on both).
        var tagRNG = SplitMix64(seed: parameters.seed ^ 0x7A65_7A65)
        var tagCounter = 0
        func tagOp(_ random: inout SplitMix64) -> TagOp {
            switch random.next() % 20 {
            case 0..<9:
                tagCounter += 1
                return .add(tag: "g\(tagCounter)")
            case 9..<14: return .remove(index: Int(random.next() % 64))
            case 14..<17: return .pin(random.chance(0.6))
            default: return .archive(random.chance(0.5))
            }
        }
        func tagStep() -> SimAction? {
            guard tagRNG.chance(0.2) else { return nil }
            let d = Int(tagRNG.next() % UInt64(max(1, parameters.devices)))
            let note = Int(tagRNG.next() % 1024)
            guard tagRNG.chance(0.25), parameters.devices > 1 else {
                switch tagRNG.next() % 15 {
                case 0..<7:
                    tagCounter += 1
                    return .tagNote(device: d, note: note, op: .add(tag: "g\(tagCounter)"))
                case 7..<11: return .tagNote(device: d, note: note, op: .remove(index: Int(tagRNG.next() % 64)))
                case 11..<13: return .tagNote(device: d, note: note, op: .pin(tagRNG.chance(0.6)))
                default: return .tagNote(device: d, note: note, op: .archive(tagRNG.chance(0.5)))
                }
            }
            let other = (d + 1 + Int(tagRNG.next() % UInt64(parameters.devices - 1))) % parameters.devices
            if tagRNG.chance(0.25) {
                tagCounter += 1
                return .concurrentTags(
                    first: d, second: other, note: note, firstOp: .add(tag: "g\(tagCounter)"), secondOp: .add(tag: "G\(tagCounter)"))
            }
            return .concurrentTags(first: d, second: other, note: note, firstOp: tagOp(&tagRNG), secondOp: tagOp(&tagRNG))
        }
        // Watch iterations come from a stream of their own, so the other steps are those of a run without watchers.
        let watchers = min(max(0, parameters.watchers ?? 0), max(1, parameters.devices))
        var watchRNG = SplitMix64(seed: parameters.seed ^ 0x57A7_C4ED)
        func watchStep() -> SimAction? {
            guard watchers > 0, watchRNG.chance(0.25) else { return nil }
            let d = Int(watchRNG.next() % UInt64(watchers))
            var fault: FeedFault?
            if parameters.faultRate > 0, watchRNG.chance(min(1, parameters.faultRate * 4)) {
                fault = FeedFault.allCases[Int(watchRNG.next() % UInt64(FeedFault.allCases.count))]
            }
            return .watchWake(device: d, fault: fault)
        }
        // Attachment steps (issue 33) come from a stream of their own too, on top of `parameters.steps`: after each
        // step, one with probability 0.08. Of them: 45% attach a file (19 in 20 of 1–8 KiB, one chunk; one in 20 of two
        // or three chunks), 15% detach one, 30% save one (a third of those cut mid-download: mid-file when the file has
        // several chunks), 10% attach a file of two or three chunks and cut the sync that uploads it mid-file, then
        // resume. Larger files are rare: they cost the run most of its time.
        var attachRNG = SplitMix64(seed: parameters.seed ^ 0xA77A_C4ED)
        var fileCounter = 0
        func attachmentStep() -> SimAction? {
            guard attachRNG.chance(0.08) else { return nil }
            let d = Int(attachRNG.next() % UInt64(max(1, parameters.devices)))
            let note = Int(attachRNG.next() % 1024)
            func file(chunks: Bool) -> SimFile {
                fileCounter += 1
                let size = chunks
                    ? ChunkRules.chunkSize + 1 + Int(attachRNG.next() % UInt64(2 * ChunkRules.chunkSize - 1))
                    : 1024 + Int(attachRNG.next() % (7 * 1024))
                return SimFile(name: "f\(fileCounter).bin", seed: attachRNG.next(), size: size)
            }
            switch attachRNG.next() % 20 {
            case 0..<9: return .attach(device: d, note: note, file: file(chunks: attachRNG.chance(0.05)))
            case 9..<12: return .detach(device: d, note: note, index: Int(attachRNG.next() % 64))
            case 12..<18:
                let cut = attachRNG.chance(1.0 / 3) ? Int(attachRNG.next() % 3) : nil
                return .save(device: d, note: note, index: Int(attachRNG.next() % 64), cutAfter: cut)
            default: return .cutUpload(device: d, note: note, file: file(chunks: true), afterChunks: Int(attachRNG.next() % 3))
            }
        }
        // Every device starts signed in to an account, so the first steps sync something.
        for d in 0..<parameters.devices where steps.count < parameters.steps {
            steps.append(.signIn(device: d, account: d % max(1, parameters.accounts), faults: []))
        }
        var tagSteps = 0  // and attachment steps: both come on top of the count
        while steps.count - tagSteps < parameters.steps {
            let roll = rng.next() % 100
            let step: SimAction
            switch roll {
            case 0..<15: step = .create(device: device(), token: token())
            case 15: step = .copy(device: device(), note: index(), account: Int(rng.next() % UInt64(max(1, parameters.accounts))))
            case 16..<40: step = .edit(device: device(), note: index(), op: editOp())
            case 40..<45: step = .delete(device: device(), note: index())
            case 45..<70: step = .sync(device: device(), faults: faults())
            case 70..<76: step = .signOut(device: device(), faults: faults())
            case 76..<83:
                let d = device()
                let account = Int(rng.next() % UInt64(max(1, parameters.accounts)))
                step = .signIn(device: d, account: account, faults: faults(), carry: rng.chance(0.5))
            case 83..<87: step = .clockJump(device: device(), milliseconds: clockJump())
            case 87..<95:
                let a = device()
                let b = parameters.devices > 1 ? (a + 1 + Int(rng.next() % UInt64(parameters.devices - 1))) % parameters.devices : a
                step = .concurrentEdit(first: a, second: b, note: index(), firstOp: editOp(), secondOp: editOp())
            case 97: step = .deleteAccount(device: device())
            case 95..<97:
                let a = device()
                let b = parameters.devices > 1 ? (a + 1 + Int(rng.next() % UInt64(parameters.devices - 1))) % parameters.devices : a
                step = .collide(first: a, second: b, firstToken: token(), secondToken: token())
            case 98: step = .revoke(device: device(), atRequest: Int(rng.next() % 4))
            default: step = .restartServer
            }
            steps.append(step)
            if steps.count - tagSteps < parameters.steps, let watch = watchStep() { steps.append(watch) }
            if let tags = tagStep() {
                steps.append(tags)
                tagSteps += 1
            }
            if let attachment = attachmentStep() {
                steps.append(attachment)
                tagSteps += 1
            }
        }
        return steps
    }
}
