import Foundation
import MiniFlake
import NoteCrypto
import NoteSyncProtocol
import NotesClient

/// An account of the simulation, with an auditor session used only to read the server's view.
struct SimAccount {
    var username: String
    var accountID: FlakeID
    var auditToken: String
    /// An end-to-end encrypted account's keys (issue 32); nil for a plaintext account.
    var keys: SimAccountKeys?

    var isEncrypted: Bool { keys != nil }

    /// Signs the account up (and its auditor in). `encryptedAs` makes it an end-to-end encrypted account of that ID
    /// (the client mints an encrypted account's ID: its keys are bound to it), whose credential is then the
    /// password's AuthKey, as `notes signup` makes it.
    static func create(username: String, password: String, encryptedAs accountID: FlakeID? = nil, on server: any SimServer) async throws -> SimAccount {
        let encoder = WireJSON.encoder()
        var request = SignUpRequest(username: username, password: password)
        var keys: SimAccountKeys?
        if let accountID {
            let (made, setup) = try SimAccountKeys.generate(accountID: accountID, password: password)
            keys = made
            request.password = made.serverPassword
            request.encryption = setup
        }
        let signUp = try await server.transport.send(WireRequest(.signUp, body: try encoder.encode(request)))
        // An encrypted account's keys are this sign-up's: one that exists already cannot be audited.
        guard signUp.status == 201 || (signUp.status == 409 && keys == nil) else {
            // A daemon's sign-up is closed by default; the simulation signs its accounts up.
            let hint = signUp.status == 403 ? " (start notesyncd with --sign-up open)" : ""
            throw SimSetupError("sign-up of \(username) answered \(signUp.status)\(hint): \(String(decoding: signUp.body, as: UTF8.self))")
        }
        let signIn = try await server.transport.send(
            WireRequest(
                .signIn,
                body: try encoder.encode(
                    SignInRequest(username: username, password: keys?.serverPassword ?? password, deviceName: "notes-sim auditor"))))
        guard signIn.status == 200 else {
            throw SimSetupError("auditor sign-in of \(username) answered \(signIn.status)")
        }
        let session = try JSONDecoder().decode(SignInResponse.self, from: signIn.body)
        if let keys, session.accountID != keys.ring.account {
            throw SimSetupError("the encrypted account \(username) is \(session.accountID), not \(keys.ring.account) its keys are bound to")
        }
        return SimAccount(username: username, accountID: session.accountID, auditToken: session.token, keys: keys)
    }
}

/// One simulated device: a real client library instance with its own in-memory store, clock and faulty link.
final class SimDevice {
    let index: Int
    let clock: ManualFlakeClock
    let transport: FaultyTransport
    let client: NotesClient
    /// This device's clock offset from the simulated wall time, changed by clock jumps.
    var skew: Int64 = 0
    var lastCursor: (account: Int, cursor: SyncCursor)?
    /// The local IDs of its live notes, ascending, as the checks read them after the device's last step (its store
    /// changes only in its own steps).
    var liveIDs: [Int64] = []
    /// The account index the device was signed in to at that read.
    var account: Int?
    /// Its notes' keys by server ID at that read.
    var serverKeys: [FlakeID: NoteKeyValue] = [:]
    /// The accounts it signed in to (a copy can go to these only).
    var knownAccounts: Set<Int> = []
    /// In watch mode: the waiting pull held open between its watch iterations, if one is.
    var held: HeldPull?
    /// Whether a local command wrote since its last successful sync (what a watch's local-store trigger sees).
    var wroteSinceSync = false
    /// The owners of its live notes (nil: no account), as the checks read them with ``liveIDs``: which decides
    /// whether an edit writes canary words (issue 32).
    var liveOwners: [Int64: FlakeID] = [:]
    /// The largest local ID of its notes at that read: a note above it is new since (pulled, or a conflict copy this
    /// device made).
    var maxLocalID: Int64 = 0

    /// - Parameter chunkCache: Where its chunk cache lives (issue 33): a directory of the run's own, since the seed
    ///   gives the device the same origin in every run of it.
    init(
        index: Int, now: Int64, server: any SimServer, seed: UInt64, idScheme: IDScheme = .miniflake, recordsExchanges: Bool = false,
        chunkCache: URL? = nil
    ) throws {
        self.index = index
        clock = ManualFlakeClock(unixMilliseconds: now)
        transport = FaultyTransport(base: server.transport(forDevice: index), recordsExchanges: recordsExchanges)
        var environment = NotesEnvironment(
            clock: clock, random: SplitMix64(seed: seed), transport: NotesEnvironment.fixed(transport),
            sleep: { _ in }, retry: RetryPolicy(maxAttempts: 3, initialDelay: .zero, maxDelay: .zero),
            deviceName: "sim-device-\(index)", flakeInstance: 7, clientIDScheme: idScheme)
        // Encrypted accounts' passwords at the testing cost (8 KiB, 1 pass), which only this explicit policy accepts:
        // the production cost's 64 MiB per sign-in would dominate a run.
        environment.kdfCost = .insecureForTesting
        environment.kdfPolicy = .allowInsecureForTesting
        environment.chunkCacheDirectory = chunkCache
        client = try NotesClient.inMemory(environment: environment)
    }
}
