import Foundation
import MiniFlake
import NoteSyncProtocol
import NotesClient

/// An account of the simulation, with an auditor session used only to read the server's view.
struct SimAccount {
    var username: String
    var accountID: FlakeID
    var auditToken: String

    static func create(username: String, password: String, on server: any SimServer) async throws -> SimAccount {
        let encoder = WireJSON.encoder()
        let signUp = try await server.transport.send(
            WireRequest(.signUp, body: try encoder.encode(SignUpRequest(username: username, password: password))))
        guard signUp.status == 201 || signUp.status == 409 else {
            // A daemon's sign-up is closed by default; the simulation signs its accounts up.
            let hint = signUp.status == 403 ? " (start notesyncd with --sign-up open)" : ""
            throw SimSetupError("sign-up of \(username) answered \(signUp.status)\(hint): \(String(decoding: signUp.body, as: UTF8.self))")
        }
        let signIn = try await server.transport.send(
            WireRequest(.signIn, body: try encoder.encode(SignInRequest(username: username, password: password, deviceName: "notes-sim auditor"))))
        guard signIn.status == 200 else {
            throw SimSetupError("auditor sign-in of \(username) answered \(signIn.status)")
        }
        let session = try JSONDecoder().decode(SignInResponse.self, from: signIn.body)
        return SimAccount(username: username, accountID: session.accountID, auditToken: session.token)
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

    init(index: Int, now: Int64, server: any SimServer, seed: UInt64, idScheme: IDScheme = .miniflake, recordsExchanges: Bool = false) throws {
        self.index = index
        clock = ManualFlakeClock(unixMilliseconds: now)
        transport = FaultyTransport(base: server.transport(forDevice: index), recordsExchanges: recordsExchanges)
        let environment = NotesEnvironment(
            clock: clock, random: SplitMix64(seed: seed), transport: NotesEnvironment.fixed(transport),
            sleep: { _ in }, retry: RetryPolicy(maxAttempts: 3, initialDelay: .zero, maxDelay: .zero),
            deviceName: "sim-device-\(index)", flakeInstance: 7, clientIDScheme: idScheme)
        client = try NotesClient.inMemory(environment: environment)
    }
}
