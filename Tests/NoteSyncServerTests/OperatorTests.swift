import ArgumentParser
import Foundation
import Logging
import MiniFlake
import NoteSyncProtocol
import Synchronization
import Testing
import TestSupport

@testable import NoteSyncServer

/// Issue 18's daemon options and rules, in process: the sign-up policy, disabled accounts, the log format and the
/// metrics address. The real binaries are driven by `OperatorsEndToEndTests`.
@Suite("operators")
struct OperatorTests {
    static func services(_ policy: SignUpPolicy, store: any NoteStore, instance: Int = 1, changeFeed: ChangeFeed? = nil) throws -> ServerServices {
        // Two servers on one store need two instance numbers, as two daemons would.
        let generator = try FlakeGenerator(instance: instance, clock: SystemFlakeClock.coarse)
        return ServerServices(
            ServiceContext(store: store, clock: SystemFlakeClock.coarse, mintID: { try generator.next() }, logger: testLogger, changeFeed: changeFeed),
            configuration: ServiceConfiguration(passwords: .bcrypt(cost: 4), signUpPolicy: policy))
    }

    @Test func theDaemonsDefaultsAreSafe() throws {
        let configuration = try NotesyncdCommand.parse([]).resolvedConfiguration(environment: [:])
        #expect(configuration.signUp == .closed)
        #expect(configuration.logFormat == .text)
        #expect(configuration.metricsAddress == nil)
    }

    @Test func optionsAndTheirVariables() throws {
        let environment = ["NOTESYNCD_SIGN_UP": "OPEN", "NOTESYNCD_LOG_FORMAT": "json", "NOTESYNCD_METRICS_ADDRESS": "127.0.0.1:9464"]
        let fromEnvironment = try NotesyncdCommand.parse([]).resolvedConfiguration(environment: environment)
        #expect(fromEnvironment.signUp == .open)
        #expect(fromEnvironment.logFormat == .json)
        #expect(fromEnvironment.metricsAddress == MetricsAddress(host: "127.0.0.1", port: 9464))
        let flags = try NotesyncdCommand.parse(["--sign-up", "closed", "--log-format", "text", "--metrics-address", "[::1]:0"])
            .resolvedConfiguration(environment: environment)
        #expect(flags.signUp == .closed)
        #expect(flags.logFormat == .text)
        #expect(flags.metricsAddress == MetricsAddress(host: "::1", port: 0))
        #expect(MetricsAddress(parsing: ":9000") == MetricsAddress(host: "127.0.0.1", port: 9000))
        #expect(MetricsAddress(host: "::1", port: 9).description == "[::1]:9")
    }

    @Test(arguments: [["--sign-up", "invites"], ["--log-format", "xml"], ["--metrics-address", "9464"], ["--metrics-address", "host:99999"]])
    func badValuesAreRefused(_ arguments: [String]) throws {
        // `parse` runs `validate()`; the one stderr line names the option's rule.
        let error = #expect(throws: (any Error).self) { try NotesyncdCommand.parse(arguments).resolvedConfiguration(environment: [:]) }
        let line = try #require(error.flatMap { NotesyncdCommand.oneLine(for: $0) })
        #expect(line.hasPrefix("notesyncd: The \(arguments[0] == "--sign-up" ? "sign-up policy" : arguments[0] == "--log-format" ? "log format" : "metrics address") must be"), "\(line)")
    }

    @Test func operatorSubcommandsParseUnderTheOneBinary() throws {
        let users = try NotesyncdCommand.parseAsRoot(["users", "list", "--data-dir", "/srv/notes", "--json"])
        let list = try #require(users as? UsersCommand.List)
        #expect(list.json)
        #expect(try list.store.resolved(environment: [:]).dataDirectory == "/srv/notes")
        let fromEnvironment = try list.store.resolved(environment: ["NOTESYNCD_DATA_DIR": "/env"])
        #expect(fromEnvironment.dataDirectory == "/srv/notes")
        let check = try #require(try NotesyncdCommand.parseAsRoot(["check"]) as? CheckCommand)
        #expect(try check.store.resolved(environment: ["NOTESYNCD_DATA_DIR": "/env"]).dataDirectory == "/env")
        #expect(try check.store.resolved(environment: ["NOTESYNCD_DATABASE": "postgres://u@db/notes"]).database == .postgres(url: "postgres://u@db/notes"))
        #expect(try NotesyncdCommand.parseAsRoot(["backup", "/tmp/copy.sqlite"]) is BackupCommand)
        #expect(try NotesyncdCommand.parseAsRoot(["stats", "--json"]) is StatsCommand)
        // Operator commands mint with another instance number than the daemon's.
        #expect(try check.store.resolved(environment: [:]).instance == 512)
        #expect(try check.store.resolved(environment: ["NOTESYNCD_INSTANCE": "600"]).instance == 88)
        let withFlag = try #require(try NotesyncdCommand.parseAsRoot(["users", "add", "x", "--instance", "7"]) as? UsersCommand.Add)
        #expect(try withFlag.store.resolved(environment: [:]).instance == 519)
        // The daemon is still the command with no subcommand.
        #expect(try NotesyncdCommand.parseAsRoot(["--port", "9090"]) is NotesyncdCommand)
    }

    /// Issue 28, item 4: `users add --help` states the username rule sign-up applies (``CredentialRules``). Failed
    /// before: it said 3-32 characters while `users add` took 40 (the rule is 3–64).
    @Test func usersAddHelpStatesTheUsernameRule() throws {
        let help = NotesyncdCommand.helpMessage(for: UsersCommand.Add.self, columns: 1000)
        #expect(help.contains(CredentialRules.usernameRule), "\(help)")
        let longest = String(repeating: "a", count: CredentialRules.usernameLength.upperBound)
        #expect(CredentialRules.canonicalUsername(longest) == longest)
        #expect(CredentialRules.canonicalUsername(longest + "a") == nil)
    }

    @Test func closedSignUpRefusesBeforeLookingAtTheRequest() async throws {
        let store = try SQLiteNoteStore.inMemory()
        let closed = try Self.services(.closed, store: store).accounts
        for request in [SignUpRequest(username: "alice", password: "long enough"), SignUpRequest(username: "!", password: "x")] {
            await #expect {
                _ = try await closed.signUp(request)
            } throws: { ($0 as? SyncError)?.code == .signUpClosed && ($0 as? SyncError)?.httpStatus == 403 }
        }
        #expect(try await store.account(byUsername: "alice") == nil)
        // The operator's path creates the account whatever the policy.
        let created = try await closed.createAccount(SignUpRequest(username: "Alice", password: "long enough"))
        #expect(created.username == "alice")
        let open = try Self.services(.open, store: store, instance: 2).accounts
        #expect(try await open.signUp(SignUpRequest(username: "bob", password: "long enough")).username == "bob")
    }

    @Test func aDisabledAccountCannotSignInAndItsTokensStop() async throws {
        let store = try SQLiteNoteStore.inMemory()
        let services = try Self.services(.open, store: store)
        let account = try await services.accounts.signUp(SignUpRequest(username: "alice", password: "long enough"))
        let signedIn = try await services.sessions.signIn(SignInRequest(username: "alice", password: "long enough"))
        #expect(try await services.sessions.authenticate(bearerToken: signedIn.token).accountID == account.accountID)
        #expect(try await store.setDisabled(accountID: account.accountID, disabledAt: 1))
        await #expect {
            _ = try await services.sessions.authenticate(bearerToken: signedIn.token)
        } throws: { ($0 as? SyncError)?.code == .unauthorized }
        await #expect {
            _ = try await services.sessions.signIn(SignInRequest(username: "alice", password: "long enough"))
        } throws: { ($0 as? SyncError)?.code == .accountDisabled && ($0 as? SyncError)?.httpStatus == 403 }
        // A wrong password still says only that.
        await #expect {
            _ = try await services.sessions.signIn(SignInRequest(username: "alice", password: "wrong password"))
        } throws: { ($0 as? SyncError)?.code == .invalidCredentials }
        #expect(try await store.setDisabled(accountID: account.accountID, disabledAt: nil))
        _ = try await services.sessions.signIn(SignInRequest(username: "alice", password: "long enough"))
    }

    @Test func jsonLogLinesAreObjects() throws {
        let lines = Mutex<[String]>([])
        var handler = JSONLogHandler(label: "notesyncd", write: { line in lines.withLock { $0.append(line) } })
        handler.logLevel = .info
        handler[metadataKey: "request_id"] = "r1"
        var logger = Logger(label: "notesyncd") { _ in handler }
        logger.logLevel = .info
        logger.warning("sign-in failed: \"quoted\"\nsecond line", metadata: ["username": "alice", "message": "clash", "list": ["a", "b"]])
        logger.debug("not at this level")
        let written = lines.withLock { $0 }
        try #require(written.count == 1)
        #expect(written[0].hasSuffix("\n"))
        #expect(written[0].dropLast().contains("\n") == false)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(written[0].utf8)) as? [String: Any])
        #expect(object["message"] as? String == "sign-in failed: \"quoted\"\nsecond line")
        #expect(object["level"] as? String == "warning")
        #expect(object["label"] as? String == "notesyncd")
        #expect(object["username"] as? String == "alice")
        #expect(object["request_id"] as? String == "r1")
        #expect(object["meta_message"] as? String == "clash")
        #expect(object["list"] as? [String] == ["a", "b"])
        #expect((object["ts"] as? String)?.hasSuffix("Z") == true)
    }

    @Test func metricsCountWhatTheAPIAnswers() async throws {
        let store = try SQLiteNoteStore.inMemory()
        let metrics = SyncMetrics()
        let (registrations, registered) = AsyncStream.makeStream(of: FlakeID.self)
        let feed = ChangeFeed(now: { 0 }, onRegister: { registered.yield($0) })
        let api = APIClient(api: SyncAPI(services: try Self.services(.open, store: store, changeFeed: feed), logger: testLogger, metrics: metrics))
        let session = try await api.account("alice")
        _ = try await api.push(session.token, [change(1, edit: 1, text: "a\n"), change(2, edit: 2, text: "b\n")])
        _ = try await api.push(session.token, [change(1, edit: 1, text: "a\n"), change(3, edit: 3, text: String(repeating: "x", count: 300_000))])
        _ = try await api.pullAll(session.token)
        _ = try await api.call(.signIn, json: SignInRequest(username: "alice", password: "wrong password"))
        _ = try await api.send(WireRequest(method: .get, path: "/nowhere"), nil)
        var registration = registrations.makeAsyncIterator()
        // A pull waiting at the account's head (it pulls nothing) while the gauges are read.
        let head = SyncCursor(sequence: try await store.currentChangeSequence(accountID: session.accountID))
        async let waiting = api.pull(session.token, since: head, wait: 30)
        _ = await registration.next()
        let text = String(decoding: await metrics.exposition(store: store, feed: feed, logger: testLogger), as: UTF8.self)
        feed.expire(now: .max)
        _ = try await waiting
        func value(_ series: String) -> Double? {
            text.split(separator: "\n").first { $0.hasPrefix(series + " ") }.flatMap { Double($0.dropFirst(series.count + 1)) }
        }
        // The replayed change answers its original result again, and is counted again.
        #expect(value(#"notesyncd_push_changes_total{status="created"}"#) == 3, "\(text)")
        #expect(value(#"notesyncd_push_changes_total{status="rejected"}"#) == 1)
        #expect(value(#"notesyncd_http_requests_total{route="push",status="200"}"#) == 2)
        #expect(value(#"notesyncd_http_requests_total{route="unmatched",status="404"}"#) == 1)
        #expect(value(#"notesyncd_sign_ins_total{outcome="success"}"#) == 1)
        #expect(value(#"notesyncd_sign_ins_total{outcome="failure"}"#) == 1)
        #expect(value("notesyncd_notes_pulled_total") == 2)
        #expect(value("notesyncd_accounts") == 1)
        #expect(value("notesyncd_notes") == 2)
        #expect(value("notesyncd_waiting_pulls") == 1)
        #expect(value(#"notesyncd_http_request_duration_seconds_count{route="push"}"#) == 2)
    }
}
