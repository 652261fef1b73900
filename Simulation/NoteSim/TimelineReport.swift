import Foundation
import MiniFlake

/// The HTML timeline of one run (`notes-sim --report`): one self-contained page (its data, styles and script inline;
/// nothing fetched), drawn by ``ReportPage``'s script from the ``RunRecording`` embedded as JSON.
///
/// Lanes: the server and one per device, time running down; a device's signed-in span is a band coloured by account;
/// syncs are arrows to and from the server lane with their counts. A note or an account can be followed. A failing
/// run opens on its failing step, with the invariant, the steps of the shortened trace, the notes involved and their
/// texts on each lane side by side.
public enum TimelineReport {
    /// A run to draw.
    public struct Run {
        public var seed: UInt64
        public var parameters: SimParameters
        /// The steps the run executed (the recording covers those up to its violation).
        public var steps: [SimAction]
        public var outcome: SimOutcome
        /// For a violation: the steps of the shortened trace that still fails (indices into ``steps``), if shrunk.
        public var trace: [Int]?
        /// The command line that reproduces the run.
        public var command: String
    }

    /// The page. A run recorded without `recordEvents` draws its summary and steps only.
    public static func render(_ run: Run) -> String {
        let recording = run.outcome.recording ?? RunRecording()
        let lastStep = run.outcome.violation.map { min($0.step, run.steps.count) } ?? run.steps.count
        var steps = run.steps.prefix(lastStep + 1).map(\.plainDescription)
        if lastStep == run.steps.count {
            steps.append(
                "Quiescence: faults stop\((run.parameters.watchers ?? 0) > 0 ? ", watching devices run watch iterations only" : ""), every signed-in device syncs twice, and every invariant is checked from scratch")
        }
        var model = PageModel(
            title: "notes-sim seed \(run.seed)",
            passed: run.outcome.violation == nil,
            shape: shape(run.parameters, steps: run.steps.count),
            command: run.command,
            devices: max(1, run.parameters.devices),
            watchers: run.parameters.watchers ?? 0,
            accounts: (0..<max(1, run.parameters.accounts)).map { "a\($0)" },
            steps: steps,
            lastStep: lastStep,
            quiescence: lastStep == run.steps.count ? lastStep : -1,
            violation: nil,
            summary: groups(run.outcome.summary),
            kinds: TouchKinds.names,
            notes: recording.notes.map { .init(l: $0.label, o: $0.originDevice, c: $0.clientID.base32, f: $0.conflictOf) },
            texts: recording.texts,
            touches: recording.touches.flatMap { [$0.step, $0.lane, $0.note, $0.kinds.rawValue, $0.text, $0.state, $0.account] },
            exchanges: recording.exchanges.flatMap { [$0.step, $0.device, $0.pushRequests, $0.pushed, $0.pullPages, $0.pulled, $0.account] },
            accountChanges: recording.accountChanges.flatMap { [$0.device, $0.step, $0.account, $0.generation] },
            events: run.outcome.events.map { .init(s: $0.step, l: $0.device ?? -1, k: $0.kind.rawValue, d: $0.detail) },
            series: .init(serverNotes: recording.serverNotes, conflicts: recording.conflicts, faults: recording.faults, pending: recording.pending))
        if let violation = run.outcome.violation {
            let involved = Involvement.find(violation, in: recording)
            model.violation = .init(
                step: violation.step, invariant: violation.invariant.rawValue, meaning: violation.invariant.meaning,
                detail: violation.detail, trace: run.trace, notes: involved.notes, notesFound: involved.found, lanes: involved.lanes,
                account: involved.account)
        }
        return ReportPage.html(title: model.title, kind: "timeline", data: encode(model))
    }

    static func shape(_ parameters: SimParameters, steps: Int) -> String {
        var parts = [
            "\(parameters.accounts) account\(parameters.accounts == 1 ? "" : "s")", "\(parameters.devices) device\(parameters.devices == 1 ? "" : "s")",
            "\(steps) steps", "faults \(parameters.faultRate)",
        ]
        if let watchers = parameters.watchers, watchers > 0 { parts.append("\(watchers) watching") }
        if let scheme = parameters.idScheme { parts.append("client IDs: \(scheme.rawValue)") }
        return parts.joined(separator: " · ")
    }

    /// The summary's counters in groups a reader scans: traffic, accounts, faults, outcomes.
    static func groups(_ summary: SimSummary) -> [PageModel.Group] {
        let fields = Dictionary(summary.fields, uniquingKeysWith: { a, _ in a })
        let layout: [(String, [String])] = [
            ("Traffic", ["steps", "syncs", "replays answered idempotently", "watch iterations", "syncs run by watches"]),
            (
                "Accounts",
                [
                    "sign-ins", "sign-outs", "notes set aside", "notes restored", "notes carried", "notes kept aside",
                    "copies to another account", "devices revoked", "revocations met mid-sync", "accounts deleted",
                ]
            ),
            (
                "Faults",
                [
                    "faults injected", "operations failed by faults", "feed faults", "server restarts", "clock jumps",
                    "forced ID collisions", "client-ID collisions in one account",
                ]
            ),
            (
                "Outcomes",
                [
                    "notes on the server", "conflict copies", "conflict copies repeating another copy's text", "merges",
                    "duplicates avoided by reconciliation",
                ]
            ),
        ]
        var placed = Set<String>()
        var groups = layout.map { name, keys in
            PageModel.Group(name: name, rows: keys.compactMap { key in fields[key].map { placed.insert(key); return [key, $0] } })
        }
        let rest = summary.fields.filter { !placed.contains($0.0) }.map { [$0.0, $0.1] }
        if !rest.isEmpty { groups.append(.init(name: "Other", rows: rest)) }
        return groups
    }

    static func encode<T: Encodable>(_ value: T) -> String {
        // JSONEncoder escapes "/", so no "</script>" can end the data early.
        let data = (try? JSONEncoder().encode(value)) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }
}

/// What the page's script reads (short keys where there are thousands of values).
struct PageModel: Encodable {
    struct Group: Encodable {
        var name: String
        var rows: [[String]]
    }
    struct Note: Encodable {
        /// Label, origin device, client ID (base32), the note a conflict copy was split from.
        var l: String
        var o: Int
        var c: String
        var f: Int
    }
    struct Event: Encodable {
        var s: Int
        var l: Int
        var k: String
        var d: String
    }
    struct Violation: Encodable {
        var step: Int
        var invariant: String
        var meaning: String
        var detail: String
        var trace: [Int]?
        var notes: [Int]
        /// How many notes the violation involves (``notes`` holds the first few).
        var notesFound: Int
        var lanes: [Int]
        /// The account the message names: the server column shows the notes there (-1: wherever they are).
        var account: Int
    }
    struct Series: Encodable {
        var serverNotes: [Int]
        var conflicts: [Int]
        var faults: [Int]
        var pending: [[Int]]
    }

    var title: String
    var passed: Bool
    var shape: String
    var command: String
    var devices: Int
    var watchers: Int
    var accounts: [String]
    /// Each step in words, up to the last one drawn.
    var steps: [String]
    var lastStep: Int
    /// The step that stands for quiescence, when the run reached it (-1: it did not).
    var quiescence: Int
    var violation: Violation?
    var summary: [Group]
    var kinds: [String]
    var notes: [Note]
    var texts: [String]
    /// Seven numbers per touch: step, lane, note, kinds, text, state, account.
    var touches: [Int]
    /// Seven per exchange: step, device, push requests, changes pushed, pull pages, records pulled, account.
    var exchanges: [Int]
    /// Four per change: device, step, account, generation.
    var accountChanges: [Int]
    var events: [Event]
    var series: Series
}

/// The notes and lanes a violation is about, found from its message and the recording.
enum Involvement {
    /// At most this many notes are pre-selected.
    static let limit = 6

    /// - Returns: the notes (at most ``limit``) and how many were found, the lanes to show them on (the server first),
    ///   and the account the message names (-1: none).
    static func find(_ violation: Violation, in recording: RunRecording) -> (notes: [Int], found: Int, lanes: [Int], account: Int) {
        let detail = violation.detail
        let step = violation.step
        // The state of every note on every device, and in every account on the server, at the failing step: the
        // last touch there. (After an account deletion one note can be in two accounts.)
        var last: [Int: [Int: RunRecording.Touch]] = [:]
        var server: [Int: [Int: RunRecording.Touch]] = [:]
        for touch in recording.touches where touch.step <= step {
            if touch.lane < 0 { server[touch.account, default: [:]][touch.note] = touch } else { last[touch.lane, default: [:]][touch.note] = touch }
        }
        var notes: [Int] = []
        var found = Set<Int>()
        func add(_ note: Int) {
            found.insert(note)
            if !notes.contains(note) && notes.count < limit { notes.append(note) }
        }
        var lanes = numbers(after: "device ", in: detail).map { Int($0) }.filter { $0 < recording.pending.count }
        let accounts = numbers(after: "account ", in: detail).map { Int($0) }

        // "device D differs from account K": the notes whose texts differ between the two.
        if [Invariant.convergence, .watchConverges].contains(violation.invariant), let d = lanes.first, let k = accounts.first {
            let hidden = TouchState.setAside | TouchState.deleted | TouchState.gone
            let shown = (last[d] ?? [:]).filter { $0.value.state & hidden == 0 }
            let held = (server[k] ?? [:]).filter { $0.value.state & (TouchState.deleted | TouchState.gone) == 0 }
            let differing = Set(shown.keys).union(held.keys).filter { shown[$0]?.text != held[$0]?.text }.sorted()
            differing.forEach(add)
        }
        // Flake IDs named in the message: client IDs, origins, server IDs.
        for value in numbers(after: "", in: detail) where value >= 1_000_000_000 {
            for (index, note) in recording.notes.enumerated() where note.clientID.rawValue == value || note.origin.rawValue == value {
                if note.origin.rawValue == value && !detail.contains(String(note.clientID.rawValue)) { continue }
                add(index)
            }
            if let id = try? FlakeID(validating: value), let index = recording.noteByServerID[id] { add(index) }
        }
        // Tokens named in the message (a lost edit): the notes whose text held them last.
        for token in tokens(in: detail) {
            let texts = Set(recording.texts.indices.filter { Lines.split(recording.texts[$0]).contains(token) })
            if let touch = recording.touches.last(where: { texts.contains($0.text) }) { add(touch.note) }
        }
        if notes.isEmpty {
            for touch in recording.touches where touch.step == step { add(touch.note) }
        }
        if lanes.isEmpty { lanes = Array(Set(recording.touches.filter { $0.step == step && $0.lane >= 0 }.map(\.lane))).sorted() }
        return (notes, found.count, [-1] + lanes, accounts.first ?? -1)
    }

    /// The integers that follow `prefix` in `text` (every integer when the prefix is empty).
    static func numbers(after prefix: String, in text: String) -> [Int64] {
        var found: [Int64] = []
        var rest = Substring(text)
        while !rest.isEmpty {
            if !prefix.isEmpty {
                guard let range = rest.range(of: prefix) else { break }
                rest = rest[range.upperBound...]
            } else {
                guard let start = rest.firstIndex(where: \.isASCIIDigit) else { break }
                rest = rest[start...]
            }
            let digits = rest.prefix(while: \.isASCIIDigit)
            if !digits.isEmpty, let value = Int64(String(digits)) { found.append(value) }
            rest = rest.dropFirst(max(1, digits.count))
        }
        return found
    }

    /// The simulation's tokens (`t123`) named in `text`.
    static func tokens(in text: String) -> [String] {
        text.split(whereSeparator: { (c: Character) in !c.isLetter && !c.isNumber }).filter { (word: Substring) in
            word.count > 1 && word.first == "t" && word.dropFirst().allSatisfy(\.isASCIIDigit)
        }.map(String.init)
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}

extension Invariant {
    /// What the invariant means, in one sentence for a reader of the report.
    var meaning: String {
        switch self {
        case .noDuplicates: "No account holds two notes for one (client ID, origin), and no device two local notes for one server note."
        case .noCrossAccount:
            "A note is only in an account a device signed in to it created, carried (from notes written signed out) or copied it into; a signed-in device shows only its account's notes."
        case .noLostEdit: "Every edit survives: in its note, merged, or in a conflict copy, unless someone who saw it removed it."
        case .convergence:
            "After every device syncs twice with no faults, each signed-in device shows exactly its account's notes, with the same texts, tags and flags."
        case .cursorMonotonic: "A device's pull cursor never moves backward within one sign-in."
        case .serverIDStable: "A note's server ID never changes once given."
        case .validIDs: "Every ID is a valid MiniFlake value, and server IDs carry the server's instance number."
        case .unexpectedError: "An operation that must succeed (no fault was injected) failed."
        case .idempotentReplay: "A push delivered twice is answered the same both times, and the replay writes nothing."
        case .pullComplete: "Pulls from a cursor miss nothing: an account's changes pulled step by step add up to all of its notes."
        case .watchConverges:
            "A watching device's waiting pull is answered once its account moves, and with faults stopped it converges through its watch iterations alone."
        case .noLostTagChange:
            "A tag a device put on a note stays unless someone who saw it took it off or a device deleted the note; a tag a device took off stays off once it synced."
        case .historyComplete: "Every version of a note the server acknowledged is in the note's history, as it was acknowledged."
        case .noPlaintextOnServer:
            "The server holds no word of an encrypted account in the clear: it serves its notes only as envelopes that open, and its store's files hold no canary word."
        case .attachmentsDownloadable:
            "Every attachment a note refers to saves with exactly the bytes attached, on every device of the account."
        case .noChunkResent:
            "A transfer resumed after a cut sends no chunk the server said it has, and downloads no chunk the device downloaded before."
        }
    }
}

extension SimAction {
    /// The step in words, for the report.
    var plainDescription: String {
        func faults(_ plans: [FaultPlan]) -> String {
            guard !plans.isEmpty else { return "" }
            return " (faults: " + plans.map { "\($0.kind.plainName) at request \($0.request + 1)" }.joined(separator: ", ") + ")"
        }
        func op(_ op: EditOp) -> String {
            switch op {
            case .append(let token): "appends \(token)"
            case .insert(_, let token): "inserts \(token)"
            case .remove: "removes a line"
            case .replace(_, let token): "replaces a line by \(token)"
            }
        }
        func tagOp(_ op: TagOp) -> String {
            switch op {
            case .add(let tag): "adds tag \(tag)"
            case .remove: "takes a tag off"
            case .pin(let on): on ? "pins" : "unpins"
            case .archive(let on): on ? "archives" : "unarchives"
            }
        }
        switch self {
        case .create(let d, let token): return "device \(d) creates note \(token)"
        case .tagNote(let d, _, let op): return "device \(d) \(tagOp(op)) a note"
        case .concurrentTags(let a, let b, _, let first, let second):
            return "devices \(a) and \(b) change the same note's tags or flags before either syncs (\(tagOp(first)); \(tagOp(second)))"
        case .edit(let d, _, let edit): return "device \(d) edits a note: \(op(edit))"
        case .delete(let d, _): return "device \(d) deletes a note"
        case .sync(let d, let plans): return "device \(d) syncs\(faults(plans))"
        case .signOut(let d, let plans): return "device \(d) signs out\(faults(plans))"
        case .signIn(let d, let account, let plans, let carry):
            return "device \(d) signs in to account a\(account)\(carry ? ", carrying the notes written while signed out" : "")\(faults(plans))"
        case .copy(let d, _, let account): return "device \(d) copies a note into account a\(account)"
        case .clockJump(let d, let milliseconds):
            return "device \(d)'s clock jumps \(milliseconds < 0 ? "back" : "forward") \(Self.duration(abs(milliseconds)))"
        case .concurrentEdit(let a, let b, _, let first, let second):
            return "devices \(a) and \(b) edit the same note before either syncs (\(op(first)); \(op(second)))"
        case .collide(let a, let b, let one, let two):
            return "devices \(a) and \(b) create notes \(one) and \(two) with the same client ID"
        case .restartServer: return "the server restarts"
        case .revoke(let d, let request): return "another device revokes device \(d)'s session before request \(request + 1) of its sync"
        case .deleteAccount(let d): return "device \(d) deletes its account (the username is signed up again, empty)"
        case .watchWake(let d, let fault): return "device \(d)'s watch wakes\(fault.map { " (feed fault: \($0.plainName))" } ?? "")"
        case .attach(let d, _, let file): return "device \(d) attaches \(file.name) (\(file.size) bytes) to a note"
        case .detach(let d, _, _): return "device \(d) detaches an attachment from a note"
        case .save(let d, _, _, let cut):
            return "device \(d) saves an attachment\(cut.map { ", the download cut after \($0) chunks, then resumed" } ?? "")"
        case .cutUpload(let d, _, let file, let after):
            return "device \(d) attaches \(file.name) (\(file.size) bytes) and syncs, the upload cut after \(after) chunks, then syncs again"
        }
    }

    static func duration(_ milliseconds: Int64) -> String {
        let seconds = milliseconds / 1000
        if seconds < 120 { return "\(seconds) s" }
        if seconds < 7200 { return "\(seconds / 60) min" }
        if seconds < 172_800 { return "\(seconds / 3600) h" }
        return "\(seconds / 86400) days"
    }
}

extension FaultKind {
    var plainName: String {
        switch self {
        case .dropRequest: "request lost"
        case .dropResponse: "answer lost"
        case .duplicate: "delivered twice"
        case .interrupt: "connection down"
        }
    }
}

extension FeedFault {
    var plainName: String {
        switch self {
        case .dropped: "connection dropped"
        case .answerLost: "answer lost"
        case .wakeLost: "wake-up lost"
        case .restartWhileWaiting: "server restarted while waiting"
        }
    }
}
