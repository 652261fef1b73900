import Foundation
import MiniFlake
import NoteCrypto
import NoteSyncProtocol
import Testing
import TestSupport

@testable import NoteSyncServer

/// End-to-end encrypted accounts through the protocol (in process, over SQLite): prelogin, sign-up and sign-in with
/// keys, the keys endpoint, and the push rules the server can enforce on what it cannot read. Hostile input is
/// answered 4xx with a stable code and stores nothing. The stores' part is in the conformance suite
/// (`NoteStoreConformance+Encryption`); the same requests over real HTTP in `EncryptedHTTPTests`.
@Suite("encrypted accounts")
struct EncryptedAccountTests {
    struct Fixture {
        let store: SQLiteNoteStore
        let clock = ManualFlakeClock(unixMilliseconds: testEpoch)
        let api: APIClient

        init(store: SQLiteNoteStore? = nil) throws {
            let store = try store ?? SQLiteNoteStore.inMemory()
            self.store = store
            let minter = CountingMinter()
            let services = ServerServices(
                ServiceContext(store: store, clock: clock, mintID: { minter.mint() }, logger: testLogger),
                configuration: ServiceConfiguration(passwords: .bcrypt(cost: 4)))
            api = APIClient(api: SyncAPI(services: services, logger: testLogger))
        }

        /// Signs `user` up and in; returns the sign-in answer.
        func signUpAndIn(_ user: EncryptedUser, device: String = "laptop") async throws -> SignInResponse {
            let created = try await api.call(.signUp, json: user.signUpRequest)
            #expect(created.status == 201, "\(created.text)")
            return try api.decode(SignInResponse.self, try await api.call(.signIn, json: user.signInRequest(device: device)))
        }

        func prelogin(_ username: String) async throws -> WireResponse {
            try await api.call(.prelogin, json: PreloginRequest(username: username))
        }
    }

    // MARK: - Prelogin

    @Test func preloginTellsPlaintextFromEncryptedButNotUnknownFromEncrypted() async throws {
        let fixture = try Fixture()
        try await fixture.api.signUp("plain")
        let user = EncryptedUser("secret")
        _ = try await fixture.signUpAndIn(user)

        let plain = try fixture.api.decode(PreloginResponse.self, try await fixture.prelogin("plain"))
        #expect(plain == PreloginResponse(encrypted: false))
        let encrypted = try fixture.api.decode(PreloginResponse.self, try await fixture.prelogin("Secret"))
        #expect(encrypted == PreloginResponse(encrypted: true, kdf: user.setup.kdf))

        // An unknown username: the same shape, a 16-byte salt of its own that does not change, the production cost.
        let unknownResponse = try await fixture.prelogin("nobody")
        let unknown = try fixture.api.decode(PreloginResponse.self, unknownResponse)
        let kdf = try #require(unknown.kdf)
        #expect(unknown.encrypted)
        #expect(kdf.opsLimit == Int64(KDFCost.production.opsLimit) && kdf.memLimit == Int64(KDFCost.production.memLimitBytes))
        #expect(try KDFParameters(cost: .production, saltText: kdf.salt).salt.count == KDFParameters.saltByteCount)
        #expect(try fixture.api.decode(PreloginResponse.self, try await fixture.prelogin("NOBODY")) == unknown)
        let other = try fixture.api.decode(PreloginResponse.self, try await fixture.prelogin("someone"))
        #expect(other.kdf?.salt != kdf.salt)
        let keys = try JSONSerialization.jsonObject(with: unknownResponse.body) as? [String: Any]
        let kdfKeys = (keys?["kdf"] as? [String: Any]).map { Set($0.keys) }
        #expect(Set(keys?.keys ?? [:].keys) == ["encrypted", "kdf"] && kdfKeys == ["salt", "opsLimit", "memLimit"])

        // The secret behind fake salts survives a restart of the service (it is in the store).
        let again = try Fixture(store: fixture.store)
        #expect(try again.api.decode(PreloginResponse.self, try await again.prelogin("nobody")) == unknown)

        let bad = try await fixture.prelogin("no spaces allowed")
        #expect(bad.status == 400 && bad.errorCode == .invalidField && bad.errorBody()?.field == "username")
    }

    // MARK: - Sign-up and sign-in

    @Test func signUpKeepsTheKeysAndSignInServesThem() async throws {
        let fixture = try Fixture()
        let user = EncryptedUser("alice")
        let created = try fixture.api.decode(AccountResponse.self, try await fixture.api.call(.signUp, json: user.signUpRequest))
        #expect(created.accountID == user.accountID && created.encryption == .encrypted)

        let session = try fixture.api.decode(SignInResponse.self, try await fixture.api.call(.signIn, json: user.signInRequest()))
        let encryption = try #require(session.encryption)
        #expect(encryption.state == .encrypted && encryption.generation == 1 && encryption.kdf == user.setup.kdf)
        #expect(encryption.recoveryPublicKey == user.recovery.publicKey.text)
        #expect(encryption.passwordPublicKey == user.passwordKeyPair.publicKey.text)
        // What the server serves opens with the password's key, as the account's key: the device's round trip.
        let unwrapped = try WrappedAccountKey(text: encryption.wrappedKey).unwrap(account: session.accountID, with: user.derived.wrapKey)
        #expect(unwrapped == user.accountKey)

        let sessions = try fixture.api.decode(SessionListResponse.self, try await fixture.api.call(.sessions, token: session.token))
        #expect(sessions.sessions.map(\.publicKey) == [user.device.publicKey.text])
        let account = try fixture.api.decode(AccountResponse.self, try await fixture.api.call(.account, token: session.token))
        #expect(account.encryption == .encrypted)

        // A plaintext account says so, and its sign-in carries no encryption.
        try await fixture.api.signUp("bob")
        let bob = try await fixture.api.signIn("bob")
        #expect(bob.encryption == nil)
        let bobAccount = try fixture.api.decode(AccountResponse.self, try await fixture.api.call(.account, token: bob.token))
        #expect(bobAccount.encryption == .plaintext)
    }

    /// One malformed part of a sign-up's key material, and the field the answer must name.
    struct Mutation: Sendable, CustomTestStringConvertible {
        var testDescription: String
        var field: String
        var apply: @Sendable (inout SignUpRequest, EncryptedUser) -> Void
    }

    static let mutations: [Mutation] = [
        Mutation(testDescription: "garbage wrapped key", field: "encryption.wrappedKey") { request, _ in
            request.encryption?.wrappedKey = "not base64!"
        },
        Mutation(testDescription: "oversized wrapped key", field: "encryption.wrappedKey") { request, _ in
            request.encryption?.wrappedKey = String(repeating: "A", count: 40_000)
        },
        Mutation(testDescription: "wrapped key by the recovery key", field: "encryption.wrappedKey") { request, user in
            request.encryption?.wrappedKey = user.accountKey.wrapped(by: user.recovery).text
        },
        Mutation(testDescription: "wrapped key of generation 2", field: "encryption.wrappedKey") { request, user in
            request.encryption?.wrappedKey = try! user.accountKey.rotated().wrapped(by: user.derived.wrapKey).text
        },
        Mutation(testDescription: "recovery-wrapped key by the password", field: "encryption.recoveryWrappedKey") { request, user in
            request.encryption?.recoveryWrappedKey = user.accountKey.wrapped(by: user.derived.wrapKey).text
        },
        Mutation(testDescription: "short recovery public key", field: "encryption.recoveryPublicKey") { request, _ in
            request.encryption?.recoveryPublicKey = String(repeating: "A", count: 42)
        },
        Mutation(testDescription: "padded password public key", field: "encryption.passwordPublicKey") { request, user in
            request.encryption?.passwordPublicKey = user.device.publicKey.text + "="
        },
        Mutation(testDescription: "15-byte salt", field: "encryption.kdf.salt") { request, _ in
            request.encryption?.kdf.salt = String(repeating: "A", count: 20)
        },
        Mutation(testDescription: "no Argon2id pass", field: "encryption.kdf.opsLimit") { request, _ in
            request.encryption?.kdf.opsLimit = 0
        },
        Mutation(testDescription: "2 GiB of Argon2id memory", field: "encryption.kdf.memLimit") { request, _ in
            request.encryption?.kdf.memLimit = 2 << 30
        },
        Mutation(testDescription: "the password itself", field: "password") { request, _ in
            request.password = "correct horse"
        },
        Mutation(testDescription: "an account ID minted a year ago", field: "encryption.accountID") { request, _ in
            request.encryption?.accountID = try! FlakeID(
                milliseconds: testEpoch - 365 * 86_400_000 - FlakeID.epochUnixMilliseconds, sequence: 0, instance: 3)
        },
    ]

    @Test(arguments: mutations)
    func signUpRefusesKeyMaterialOfTheWrongFormAndStoresNothing(_ mutation: Mutation) async throws {
        let fixture = try Fixture()
        let user = EncryptedUser("mallory")
        var request = user.signUpRequest
        mutation.apply(&request, user)
        let response = try await fixture.api.call(.signUp, json: request)
        #expect(response.status == 400 && response.errorCode == .invalidField, "\(response.text)")
        #expect(response.errorBody()?.field == mutation.field)
        #expect(try await fixture.store.account(byUsername: "mallory") == nil)
        // The untouched request goes through: the mutation alone was refused.
        #expect(try await fixture.api.call(.signUp, json: user.signUpRequest).status == 201)
    }

    @Test func signUpAndSignInRefuseMalformedJSONOfTheNewFields() async throws {
        let fixture = try Fixture()
        let user = EncryptedUser("carol")
        let setup = String(decoding: try WireJSON.encoder().encode(user.setup), as: UTF8.self)
        let withExtra = setup.dropLast() + #","sneaky":1}"#
        for (body, code) in [
            (#"{"username":"carol","password":"\#(user.password)","encryption":null}"#, APIErrorCode.invalidJSON),
            (#"{"username":"carol","password":"\#(user.password)","encryption":\#(withExtra)}"#, .unknownField),
            (#"{"username":"carol","password":"\#(user.password)","encryption":{"kdf":1}}"#, .invalidJSON),
        ] {
            let response = try await fixture.api.call(.signUp, rawJSON: body)
            #expect(response.status == 400 && response.errorCode == code, "\(body) → \(response.text)")
        }
        #expect(try await fixture.store.account(byUsername: "carol") == nil)
        _ = try await fixture.signUpAndIn(user)
        var request = user.signInRequest()
        request.devicePublicKey = "AAAA"
        let response = try await fixture.api.call(.signIn, json: request)
        #expect(response.status == 400 && response.errorCode == .invalidField && response.errorBody()?.field == "devicePublicKey")
    }

    // MARK: - Keys

    @Test func keysEndpointServesTheCurrentGenerationAndRefusesPlaintextAccounts() async throws {
        let fixture = try Fixture()
        let user = EncryptedUser("dora")
        let session = try await fixture.signUpAndIn(user)
        let keys = try fixture.api.decode(AccountKeysResponse.self, try await fixture.api.call(.accountKeys, token: session.token))
        #expect(
            keys
                == AccountKeysResponse(
                    state: .encrypted, generation: 1, through: 1, wrappedKey: user.setup.wrappedKey, older: [], handovers: [],
                    passwordHandovers: [], recoveryWrappedKey: user.setup.recoveryWrappedKey, recoveryHandovers: [],
                    recoveryPublicKey: user.setup.recoveryPublicKey, passwordPublicKey: user.setup.passwordPublicKey))
        let after = try fixture.api.decode(
            AccountKeysResponse.self,
            try await fixture.api.call(.accountKeys, token: session.token, query: [(AccountKeysQuery.after, "1")]))
        #expect(after.through == 1 && after.older.isEmpty && after.handovers.isEmpty)
        for bad in ["-1", "x", "01", "4294967296", ""] {
            let response = try await fixture.api.call(.accountKeys, token: session.token, query: [(AccountKeysQuery.after, bad)])
            #expect(response.status == 400 && response.errorCode == .invalidField, "after=\(bad)")
        }
        try await fixture.api.signUp("plain")
        let plain = try await fixture.api.signIn("plain")
        let refused = try await fixture.api.call(.accountKeys, token: plain.token)
        #expect(refused.status == 409 && refused.errorCode == .notEncrypted)
        #expect(try await fixture.api.call(.accountKeys).status == 401)
    }

    // MARK: - Rotation

    /// A rotation as a device makes it: generation 2 sealed to `sessions`, the recovery key and the password.
    static func rotation(_ user: EncryptedUser, to next: AccountKey, sessions: [FlakeID]) throws -> RotateKeysRequest {
        RotateKeysRequest(
            generation: Int64(next.generation), older: try user.accountKey.wrapped(by: next).text,
            handovers: try sessions.map {
                SessionHandover(sessionID: $0, handover: try KeyHandover.seal(next, authenticatedBy: user.accountKey, to: user.device.publicKey).text)
            },
            recoveryHandover: try KeyHandover.seal(next, authenticatedBy: user.accountKey, to: user.recovery.publicKey).text,
            passwordHandover: try KeyHandover.seal(next, authenticatedBy: user.accountKey, to: user.passwordKeyPair.publicKey).text)
    }

    @Test func aRotationIsStoredWhole_andServedToTheDevicesItWasSealedTo() async throws {
        let fixture = try Fixture()
        let user = EncryptedUser("kim")
        let laptop = try await fixture.signUpAndIn(user)
        let phone = try await fixture.signUpAndIn(user, device: "phone", signUp: false)
        let next = try user.accountKey.rotated()
        // Sealed under generation 2 before it exists: refused.
        let early = try await fixture.api.push(laptop.token, [TestSupport.change(1, edit: 9, text: try NoteEnvelope.seal(
            plaintext: [1], context: .init(account: user.accountID, clientID: id(1), origin: id(77), editID: id(9)), key: next).text)])
        #expect(early[0].error?.code == .invalidField)

        let request = try Self.rotation(user, to: next, sessions: [phone.sessionID])
        let rotated = try fixture.api.decode(RotateKeysResponse.self, try await fixture.api.call(.rotateKeys, token: laptop.token, json: request))
        #expect(rotated.generation == 2)
        // The phone opens its hand-over with its device key and the generation it holds.
        let keys = try fixture.api.decode(
            AccountKeysResponse.self, try await fixture.api.call(.accountKeys, token: phone.token, query: [(AccountKeysQuery.after, "1")]))
        #expect(keys.generation == 2 && keys.through == 2 && keys.older.isEmpty)
        #expect(keys.handovers.map(\.generation) == [2] && keys.passwordHandovers.map(\.generation) == [2])
        #expect(keys.recoveryHandovers?.map(\.generation) == [2])
        let opened = try KeyHandover(text: keys.handovers[0].handover).open(with: user.device, keys: AccountKeyRing(user.accountKey))
        #expect(opened == next)
        let byPassword = try KeyHandover(text: keys.passwordHandovers[0].handover).open(with: user.passwordKeyPair, keys: AccountKeyRing(user.accountKey))
        #expect(byPassword == next)
        // A device that holds only the new generation walks the chain down; the laptop was given no hand-over.
        let fromStart = try fixture.api.decode(AccountKeysResponse.self, try await fixture.api.call(.accountKeys, token: laptop.token))
        #expect(fromStart.handovers.isEmpty && fromStart.older.count == 1)
        #expect(try WrappedAccountKey(text: fromStart.older[0]).unwrap(with: AccountKeyRing(next)) == user.accountKey)
        // Sign-in now says generation 2 (the password-wrapped key is still generation 1's: rotations never need it).
        let signedIn = try fixture.api.decode(SignInResponse.self, try await fixture.api.call(.signIn, json: user.signInRequest()))
        #expect(signedIn.encryption?.generation == 2)
        // Envelopes of generation 2 are taken now.
        let sealed = try NoteEnvelope.seal(
            plaintext: [1], context: .init(account: user.accountID, clientID: id(1), origin: id(77), editID: id(10)), key: next)
        #expect(try await fixture.api.push(phone.token, [TestSupport.change(1, edit: 10, text: sealed.text)])[0].status == .created)

        // The same rotation again, or one that skips a generation: stale_generation, nothing stored.
        for generation in [Int64(2), 4] {
            var again = request
            again.generation = generation
            let response = try await fixture.api.call(.rotateKeys, token: laptop.token, json: again)
            #expect(generation == 2 ? response.errorCode == .staleGeneration : response.errorCode == .invalidField, "\(response.text)")
        }
        let third = try next.rotated()
        var stale = try Self.rotation(user, to: third, sessions: [])
        stale.older = try next.wrapped(by: third).text
        stale.generation = 3
        #expect(try await fixture.api.call(.rotateKeys, token: laptop.token, json: stale).status == 200)
        var late = try Self.rotation(user, to: third, sessions: [])
        late.older = try next.wrapped(by: third).text
        let refused = try await fixture.api.call(.rotateKeys, token: phone.token, json: late)
        #expect(refused.status == 409 && refused.errorCode == .staleGeneration)
    }

    @Test func aRotationOfTheWrongFormOrForAnotherAccountsSessionStoresNothing() async throws {
        let fixture = try Fixture()
        let user = EncryptedUser("lee")
        let session = try await fixture.signUpAndIn(user)
        let next = try user.accountKey.rotated()
        let good = try Self.rotation(user, to: next, sessions: [session.sessionID])
        try await fixture.api.signUp("other")
        let stranger = try await fixture.api.signIn("other")
        var cases: [(RotateKeysRequest, APIErrorCode, String)] = []
        var request = good
        request.generation = 1
        cases.append((request, .invalidField, "generation"))
        request = good
        request.older = user.wrappedKey.text
        cases.append((request, .invalidField, "older"))
        request = good
        request.older = String(repeating: "A", count: 5000)
        cases.append((request, .invalidField, "older"))
        request = good
        request.handovers[0].handover = "AAAA"
        cases.append((request, .invalidField, "handovers[0].handover"))
        request = good
        request.handovers.append(request.handovers[0])
        cases.append((request, .invalidField, "handovers[1].sessionID"))
        request = good
        request.recoveryHandover = good.recoveryHandover + "AA"
        cases.append((request, .invalidField, "recoveryHandover"))
        request = good
        request.handovers[0].sessionID = stranger.sessionID
        cases.append((request, .unknownSession, "handovers"))
        for (request, code, field) in cases {
            let response = try await fixture.api.call(.rotateKeys, token: session.token, json: request)
            #expect(response.errorCode == code && response.errorBody()?.field == field, "\(field): \(response.text)")
        }
        let keys = try fixture.api.decode(AccountKeysResponse.self, try await fixture.api.call(.accountKeys, token: session.token))
        #expect(keys.generation == 1 && keys.handovers.isEmpty && keys.older.isEmpty)
        // A plaintext account has nothing to rotate.
        let plain = try await fixture.api.call(.rotateKeys, token: stranger.token, json: good)
        #expect(plain.status == 409 && plain.errorCode == .notEncrypted)
        #expect(try await fixture.api.call(.rotateKeys, token: session.token, json: good).status == 200)
    }

    // MARK: - Push

    @Test func encryptedPushesStoreEnvelopesWithTheirEditIDs() async throws {
        let fixture = try Fixture()
        let user = EncryptedUser("erin")
        let session = try await fixture.signUpAndIn(user)
        let created = try await fixture.api.push(session.token, [user.change(1, edit: 10, plaintext: "first")])
        #expect(created.map(\.status) == [.created])
        let note = try #require(created[0].serverID)
        let edited = try await fixture.api.push(session.token, [user.change(1, server: note, edit: 11, plaintext: "second", baseVersion: 1)])
        #expect(edited.map(\.status) == [.updated] && edited[0].version == 2)
        let pulled = try await fixture.api.pullAll(session.token)
        #expect(pulled.count == 1 && pulled[0].editID == id(11) && pulled[0].tags == [] && pulled[0].pinned == false)
        // The device opens what it pulls, bound to the edit the server says wrote it.
        let opened = try NoteEnvelope.open(
            NoteEnvelope(text: pulled[0].text),
            expecting: .init(account: user.accountID, clientID: id(1), origin: id(77), editID: try #require(pulled[0].editID)),
            keys: AccountKeyRing(user.accountKey))
        #expect(String(decoding: opened.plaintext, as: UTF8.self) == "second")
        let versions = try await fixture.api.allVersions(session.token, note)
        #expect(versions.map(\.editID) == [id(10), id(11)])
        // A replay answers the stored outcome.
        let replay = try await fixture.api.push(session.token, [user.change(1, server: note, edit: 11, plaintext: "second", baseVersion: 1)])
        #expect(replay[0].replayed && replay[0].status == .updated && replay[0].version == 2)
    }

    @Test func anEncryptedAccountRefusesPlaintextAndStoresNothingOfIt() async throws {
        let fixture = try Fixture()
        let user = EncryptedUser("fay")
        let session = try await fixture.signUpAndIn(user)
        let sealed = user.seal("secret", clientID: 1, editID: 10)
        let rotated = try user.accountKey.rotated()
        let tooNew = try NoteEnvelope.seal(
            plaintext: Array("x".utf8), context: .init(account: user.accountID, clientID: id(1), origin: id(77), editID: id(10)), key: rotated
        ).text
        let hostile: [(NoteChange, APIErrorCode, String)] = [
            (change(1, edit: 10, text: "plain words in the clear"), .notEncrypted, "text"),
            (change(1, edit: 10, text: String(sealed.dropLast(30))), .notEncrypted, "text"),
            (change(1, edit: 10, text: "AAAA"), .notEncrypted, "text"),
            (change(1, edit: 10, text: "plain", deleted: true), .notEncrypted, "text"),
            (change(1, edit: 10, text: tooNew), .invalidField, "text"),
            (change(1, edit: 10, text: sealed, baseText: "the old text"), .invalidField, "baseText"),
            (NoteChange(clientID: id(1), origin: id(77), editID: id(10), text: sealed, tags: ["diary"]), .invalidField, "tags"),
            (NoteChange(clientID: id(1), origin: id(77), editID: id(10), text: sealed, pinned: true), .invalidField, "pinned"),
            (NoteChange(clientID: id(1), origin: id(77), editID: id(10), text: sealed, baseArchived: false), .invalidField, "baseArchived"),
        ]
        for (change, code, field) in hostile {
            let results = try await fixture.api.push(session.token, [change])
            #expect(results[0].status == .rejected && results[0].error?.code == code, "\(change) → \(results[0])")
            #expect(results[0].error?.field == "changes[0].\(field)")
        }
        #expect(try await fixture.api.pullAll(session.token).isEmpty)
        let usage = try #require(try await fixture.store.usage(accountID: user.accountID))
        #expect(usage == AccountUsage())
        // The well-formed change after all that goes through.
        #expect(try await fixture.api.push(session.token, [user.change(1, edit: 10, plaintext: "secret")]).map(\.status) == [.created])
    }

    @Test func aChangeOnAnOlderBaseIsStaleAndNothingIsWritten() async throws {
        let fixture = try Fixture()
        let user = EncryptedUser("gil")
        let laptop = try await fixture.signUpAndIn(user)
        let phone = try await fixture.signUpAndIn(user, device: "phone", signUp: false)
        let note = try #require(try await fixture.api.push(laptop.token, [user.change(1, edit: 10, plaintext: "v1")])[0].serverID)
        #expect(try await fixture.api.push(phone.token, [user.change(1, server: note, edit: 20, plaintext: "phone's", baseVersion: 1)])[0].status == .updated)
        let sequence = try await fixture.store.currentChangeSequence(accountID: user.accountID)

        // The laptop's edit, its delete, and a change without a server ID on no base: each goes back to the device.
        for change in [
            user.change(1, server: note, edit: 11, plaintext: "laptop's", baseVersion: 1),
            user.delete(1, server: note, edit: 12, baseVersion: 1),
            user.change(1, edit: 13, plaintext: "laptop's again"),
        ] {
            let result = try #require(try await fixture.api.push(laptop.token, [change]).first)
            #expect(result.status == .stale && result.serverID == note && result.version == 2 && result.error == nil, "\(result)")
        }
        #expect(try await fixture.store.currentChangeSequence(accountID: user.accountID) == sequence)
        // Nothing was recorded either: the same edit ID on the current base is applied, not answered as a replay.
        let merged = try await fixture.api.push(laptop.token, [user.change(1, server: note, edit: 11, plaintext: "merged", baseVersion: 2)])
        #expect(merged[0].status == .updated && !merged[0].replayed && merged[0].version == 3)
        // A delete on the current base is a tombstone; a delete of a tombstone is unchanged whatever its base.
        #expect(try await fixture.api.push(laptop.token, [user.delete(1, server: note, edit: 14, baseVersion: 3)])[0].status == .deleted)
        #expect(try await fixture.api.push(phone.token, [user.delete(1, server: note, edit: 21, baseVersion: 2)])[0].status == .unchanged)
        // Reconciliation by (client ID, origin) with the note's own text is not stale.
        let other = user.change(2, edit: 30, plaintext: "two")
        #expect(try await fixture.api.push(laptop.token, [other])[0].status == .created)
        var resent = other
        resent.editID = id(31)
        #expect(try await fixture.api.push(phone.token, [resent])[0].status == .reconciled)
    }

    @Test func plaintextAccountsKeepMergingAsBefore() async throws {
        let fixture = try Fixture()
        let session = try await fixture.api.account("plain")
        let note = try #require(try await fixture.api.push(session.token, [change(1, edit: 1, text: "a\nb\n")])[0].serverID)
        _ = try await fixture.api.push(session.token, [change(1, server: note, edit: 2, text: "a\nb\nc\n", baseVersion: 1)])
        let merged = try await fixture.api.push(
            session.token, [change(1, server: note, edit: 3, text: "z\na\nb\n", baseVersion: 1, baseText: "a\nb\n")])
        #expect(merged[0].status == .merged && merged[0].text == "z\na\nb\nc\n")
        #expect(try await fixture.api.pullAll(session.token).first?.editID == id(3))
    }

    // MARK: - The operator's reset

    @Test func anOperatorsResetMakesTheNewPasswordsAuthKeyTheCredentialAndSaysReset() async throws {
        let fixture = try Fixture()
        let user = EncryptedUser("ivy")
        let session = try await fixture.signUpAndIn(user)
        let account = try #require(try await fixture.store.account(byUsername: "ivy"))
        // What `notesyncd users reset-password` does: the AuthKey of the new password with the account's salt.
        let authKey = try await EncryptedReset.authKey(of: "temporary pass", account: account, store: fixture.store)
        #expect(authKey == (try PasswordKDF.deriveKeys(password: "temporary pass", parameters: user.kdf, policy: .allowInsecureForTesting)).authKey.serverPassword)
        let hash = try await PasswordHashing.bcrypt(cost: 4).run { $0.hash(authKey) }
        #expect(try await fixture.store.resetEncryptedPassword(accountID: user.accountID, passwordHash: hash))
        // Every device is signed out; the old credential no longer signs in; the new one does, and the answer says reset.
        #expect(try await fixture.api.call(.account, token: session.token).status == 401)
        #expect(try await fixture.api.call(.signIn, json: user.signInRequest()).errorCode == .invalidCredentials)
        let signedIn = try fixture.api.decode(
            SignInResponse.self, try await fixture.api.call(.signIn, json: SignInRequest(username: "ivy", password: authKey)))
        #expect(signedIn.encryption?.state == .reset && signedIn.encryption?.wrappedKey == user.setup.wrappedKey)
        let keys = try fixture.api.decode(AccountKeysResponse.self, try await fixture.api.call(.accountKeys, token: signedIn.token))
        #expect(keys.state == .reset && keys.recoveryWrappedKey == user.setup.recoveryWrappedKey)
        // The recovery key opens generation 1 from what the server serves.
        let recovered = try WrappedAccountKey(text: try #require(keys.recoveryWrappedKey)).unwrap(account: user.accountID, with: user.recovery)
        #expect(recovered == user.accountKey)
        // A plaintext account is not reset this way.
        try await fixture.api.signUp("plain")
        let plain = try #require(try await fixture.store.account(byUsername: "plain"))
        #expect(try await fixture.store.resetEncryptedPassword(accountID: plain.id, passwordHash: hash) == false)
        #expect(try await fixture.store.account(byUsername: "plain")?.encryption == .plaintext)
    }

    @Test func aPasswordChangeAfterAResetRecoversTheAccountAndARotationReplacesTheRecoveryKey() async throws {
        let fixture = try Fixture()
        let user = EncryptedUser("una")
        _ = try await fixture.signUpAndIn(user)
        let account = try #require(try await fixture.store.account(byUsername: "una"))
        let authKey = try await EncryptedReset.authKey(of: "temporary pass", account: account, store: fixture.store)
        let hash = try await PasswordHashing.bcrypt(cost: 4).run { $0.hash(authKey) }
        #expect(try await fixture.store.resetEncryptedPassword(accountID: user.accountID, passwordHash: hash))
        let temporary = try fixture.api.decode(
            SignInResponse.self,
            try await fixture.api.call(
                .signIn, json: SignInRequest(username: "una", password: authKey, devicePublicKey: user.device.publicKey.text)))
        // The device opened the key with the recovery key; the new password wraps it: the account is encrypted again.
        let kdf = KDFParameters.generate(cost: .insecureForTesting)
        let derived = try PasswordKDF.deriveKeys(password: "after the reset", parameters: kdf, policy: .allowInsecureForTesting)
        let info = KDFInfo(salt: kdf.saltText, opsLimit: Int64(kdf.cost.opsLimit), memLimit: Int64(kdf.cost.memLimitBytes))
        let change = ChangePasswordRequest(
            currentPassword: authKey, newPassword: derived.authKey.serverPassword,
            encryption: PasswordChangeEncryption(
                kdf: info, wrappedKey: user.accountKey.wrapped(by: derived.wrapKey).text,
                passwordPublicKey: derived.passwordKeyPair.publicKey.text))
        #expect(try await fixture.api.call(.changePassword, token: temporary.token, json: change).status == 200)
        #expect(try await fixture.store.account(byUsername: "una")?.encryption == .encrypted)

        // A new recovery key rides on a rotation: its material must be of the new generation.
        let next = try user.accountKey.rotated()
        let renewed = RecoveryKey.generate()
        var rotation = try Self.rotation(user, to: next, sessions: [])
        rotation.recoveryHandover = try KeyHandover.seal(next, authenticatedBy: user.accountKey, to: renewed.publicKey).text
        rotation.recovery = RecoveryRenewal(recoveryWrappedKey: user.setup.recoveryWrappedKey, recoveryPublicKey: renewed.publicKey.text)
        let wrong = try await fixture.api.call(.rotateKeys, token: temporary.token, json: rotation)
        #expect(wrong.errorBody()?.field == "recovery.recoveryWrappedKey", "\(wrong.text)")
        rotation.recovery?.recoveryPublicKey = "not a key"
        rotation.recovery?.recoveryWrappedKey = next.wrapped(by: renewed).text
        #expect(try await fixture.api.call(.rotateKeys, token: temporary.token, json: rotation).errorBody()?.field == "recovery.recoveryPublicKey")
        #expect(try await fixture.store.account(byUsername: "una")?.keyGeneration == 1)
        // Not in a password change (which keeps the recovery key).
        var withRecovery = change
        withRecovery.currentPassword = derived.authKey.serverPassword
        withRecovery.encryption?.rotation = rotation
        #expect(
            try await fixture.api.call(.changePassword, token: temporary.token, json: withRecovery).errorBody()?.field
                == "encryption.rotation.recovery")
        rotation.recovery?.recoveryPublicKey = renewed.publicKey.text
        #expect(try await fixture.api.call(.rotateKeys, token: temporary.token, json: rotation).status == 200)
        let keys = try fixture.api.decode(AccountKeysResponse.self, try await fixture.api.call(.accountKeys, token: temporary.token))
        #expect(keys.recoveryPublicKey == renewed.publicKey.text && keys.recoveryHandovers?.map(\.generation) == [2])
        // The new recovery key opens generation 2 directly and generation 1 down the chain; the old one opens nothing served.
        let opened = try WrappedAccountKey(text: try #require(keys.recoveryWrappedKey)).unwrap(account: user.accountID, with: renewed)
        #expect(opened == next)
        #expect(try WrappedAccountKey(text: keys.older[0]).unwrap(with: AccountKeyRing(opened)) == user.accountKey)
        #expect(throws: NoteCryptoError.self) {
            _ = try WrappedAccountKey(text: try #require(keys.recoveryWrappedKey)).unwrap(account: user.accountID, with: user.recovery)
        }
    }

    // MARK: - Setting up an operator's account

    @Test func anEmptyPlaintextAccountIsSetUpAsEncryptedOnce() async throws {
        let fixture = try Fixture()
        // As `notesyncd users add` makes it: plaintext, no notes.
        try await fixture.api.signUp("mia", "operator's pw")
        let first = try await fixture.api.signIn("mia", "operator's pw")
        let second = try await fixture.api.signIn("mia", "operator's pw", device: "phone")
        let user = EncryptedUser("mia", now: testEpoch, password: "operator's pw")
        let request = AccountEncryptionRequest(
            currentPassword: "operator's pw", newPassword: user.password,
            encryption: EncryptionSetup(
                accountID: first.accountID, kdf: user.setup.kdf, wrappedKey: user.setup.wrappedKey,
                recoveryWrappedKey: user.setup.recoveryWrappedKey, recoveryPublicKey: user.setup.recoveryPublicKey,
                passwordPublicKey: user.setup.passwordPublicKey))
        // Keys bound to another account ID, a wrong password: refused, nothing changes.
        var otherID = request
        otherID.encryption.accountID = user.accountID
        #expect(try await fixture.api.call(.setUpEncryption, token: first.token, json: otherID).errorBody()?.field == "encryption.accountID")
        var wrong = request
        wrong.currentPassword = "not the one"
        #expect(try await fixture.api.call(.setUpEncryption, token: first.token, json: wrong).errorCode == .wrongPassword)
        #expect(try await fixture.store.account(byUsername: "mia")?.encryption == .plaintext)

        let done = try fixture.api.decode(
            RevokedSessionsResponse.self, try await fixture.api.call(.setUpEncryption, token: first.token, json: request))
        #expect(done.revokedSessions == 1)
        #expect(try await fixture.api.call(.account, token: second.token).status == 401)
        let prelogin = try fixture.api.decode(PreloginResponse.self, try await fixture.prelogin("mia"))
        #expect(prelogin == PreloginResponse(encrypted: true, kdf: user.setup.kdf))
        let signedIn = try fixture.api.decode(
            SignInResponse.self, try await fixture.api.call(.signIn, json: SignInRequest(username: "mia", password: user.password)))
        #expect(signedIn.encryption?.state == .encrypted && signedIn.encryption?.generation == 1)
        // Plaintext pushes are refused from now on.
        #expect(try await fixture.api.push(first.token, [change(1, edit: 1, text: "clear")])[0].error?.code == .notEncrypted)
        // Once only.
        var again = request
        again.currentPassword = user.password
        let twice = try await fixture.api.call(.setUpEncryption, token: first.token, json: again)
        #expect(twice.status == 409 && twice.errorCode == .alreadyEncrypted)

        // An account with notes starts converting instead: ConversionTests.swift.
    }

    // MARK: - Password change

    @Test func aPasswordChangeReWrapsTheKeyRotatesItAndReUploadsNothing() async throws {
        let fixture = try Fixture()
        let user = EncryptedUser("joe")
        let laptop = try await fixture.signUpAndIn(user)
        let phone = try await fixture.signUpAndIn(user, device: "phone", signUp: false)
        _ = try await fixture.api.push(laptop.token, (1...20).map { user.change(Int64($0), edit: Int64(100 + $0), plaintext: "note \($0)") })
        let sequence = try await fixture.store.currentChangeSequence(accountID: user.accountID)

        // The new password's keys, the current key rotated, re-wrapped by the new password.
        let kdf = KDFParameters.generate(cost: .insecureForTesting)
        let derived = try PasswordKDF.deriveKeys(password: "new horse", parameters: kdf, policy: .allowInsecureForTesting)
        let newPasswordKeys = DeviceKeyPair.generate()
        let next = try user.accountKey.rotated()
        var rotation = try Self.rotation(user, to: next, sessions: [])
        rotation.passwordHandover = try KeyHandover.seal(next, authenticatedBy: user.accountKey, to: newPasswordKeys.publicKey).text
        let change = PasswordChangeEncryption(
            kdf: KDFInfo(salt: kdf.saltText, opsLimit: Int64(kdf.cost.opsLimit), memLimit: Int64(kdf.cost.memLimitBytes)),
            wrappedKey: next.wrapped(by: derived.wrapKey).text, passwordPublicKey: newPasswordKeys.publicKey.text, rotation: rotation)
        let request = ChangePasswordRequest(currentPassword: user.password, newPassword: derived.authKey.serverPassword, encryption: change)

        // Refused whole: no encryption, a wrapped key of another generation than the rotation's, the wrong password.
        var bare = request
        bare.encryption = nil
        #expect(try await fixture.api.call(.changePassword, token: laptop.token, json: bare).errorBody()?.field == "encryption")
        var mismatched = request
        mismatched.encryption?.wrappedKey = user.accountKey.wrapped(by: derived.wrapKey).text
        #expect(try await fixture.api.call(.changePassword, token: laptop.token, json: mismatched).errorBody()?.field == "encryption.wrappedKey")
        var wrong = request
        wrong.currentPassword = String(repeating: "0", count: 64)
        #expect(try await fixture.api.call(.changePassword, token: laptop.token, json: wrong).errorCode == .wrongPassword)
        #expect(try await fixture.api.call(.account, token: phone.token).status == 200)

        let changed = try fixture.api.decode(
            RevokedSessionsResponse.self, try await fixture.api.call(.changePassword, token: laptop.token, json: request))
        #expect(changed.revokedSessions == 1)
        #expect(try await fixture.api.call(.account, token: phone.token).status == 401)
        // No note was re-uploaded: the account's change sequence did not move.
        #expect(try await fixture.store.currentChangeSequence(accountID: user.accountID) == sequence)
        // The old credential is gone; the new one signs in, and what it is served opens with the new password.
        #expect(try await fixture.api.call(.signIn, json: user.signInRequest()).errorCode == .invalidCredentials)
        let prelogin = try fixture.api.decode(PreloginResponse.self, try await fixture.prelogin("joe"))
        #expect(prelogin.kdf == change.kdf)
        let signedIn = try fixture.api.decode(
            SignInResponse.self, try await fixture.api.call(.signIn, json: SignInRequest(username: "joe", password: derived.authKey.serverPassword)))
        let encryption = try #require(signedIn.encryption)
        #expect(encryption.generation == 2 && encryption.passwordPublicKey == newPasswordKeys.publicKey.text)
        #expect(try WrappedAccountKey(text: encryption.wrappedKey).unwrap(account: user.accountID, with: derived.wrapKey) == next)
        let keys = try fixture.api.decode(AccountKeysResponse.self, try await fixture.api.call(.accountKeys, token: signedIn.token))
        #expect(try WrappedAccountKey(text: keys.older[0]).unwrap(with: AccountKeyRing(next)) == user.accountKey)
        #expect(keys.recoveryWrappedKey == user.setup.recoveryWrappedKey)

        // A change without rotation must wrap the generation the account is at.
        let again = ChangePasswordRequest(
            currentPassword: derived.authKey.serverPassword, newPassword: user.password,
            encryption: PasswordChangeEncryption(kdf: user.setup.kdf, wrappedKey: user.wrappedKey.text, passwordPublicKey: user.passwordKeyPair.publicKey.text))
        let stale = try await fixture.api.call(.changePassword, token: signedIn.token, json: again)
        #expect(stale.status == 409 && stale.errorCode == .staleGeneration)
        // A plaintext account's change carries no encryption.
        let plain = try await fixture.api.account("plain")
        let refused = try await fixture.api.call(
            .changePassword, token: plain.token,
            json: ChangePasswordRequest(currentPassword: "correct horse", newPassword: "new horse battery", encryption: change))
        #expect(refused.status == 400 && refused.errorBody()?.field == "encryption")
    }

    // MARK: - What the store holds

    /// The canary test: an encrypted account's words are never in the database file or its WAL, while a plaintext
    /// account's are (so the scan would see them).
    @Test func noPlaintextOfAnEncryptedAccountReachesTheDatabaseFiles() async throws {
        let store = try SQLiteNoteStore.temporary()
        let fixture = try Fixture(store: store)
        let user = EncryptedUser("hana")
        let session = try await fixture.signUpAndIn(user)
        let canary = "zebracanary"
        var changes: [NoteChange] = []
        for n in 1...50 { changes.append(user.change(Int64(n), edit: Int64(1000 + n), plaintext: "\(canary) \(n) \(canary)")) }
        #expect(try await fixture.api.push(session.token, changes).allSatisfy { $0.status == .created })
        // A client that tries to send one in the clear is refused, and nothing of it is kept.
        let refused = try await fixture.api.push(session.token, [change(99, edit: 2000, text: "\(canary) in the clear")])
        #expect(refused[0].error?.code == .notEncrypted)
        // Edits, deletes and history too.
        let first = try #require(try await fixture.api.pullAll(session.token).first)
        _ = try await fixture.api.push(
            session.token, [user.change(first.clientID.rawValue, server: first.serverID, edit: 3000, plaintext: "\(canary) edited", baseVersion: 1)])

        let plain = try await fixture.api.account("plainuser")
        _ = try await fixture.api.push(plain.token, [change(1, edit: 1, text: "koalacontrol is readable")])

        let path = try #require(store.databasePath)
        func hits(_ word: String) -> Int { ConversionTests.hits(word, in: [path, path + "-wal"]) }
        #expect(hits(canary) == 0)
        #expect(hits("koalacontrol") > 0)
        try await store.close()
    }
}

extension EncryptedAccountTests.Fixture {
    /// Signs `user` in on another device (no sign-up).
    func signUpAndIn(_ user: EncryptedUser, device: String, signUp: Bool) async throws -> SignInResponse {
        if signUp { return try await signUpAndIn(user, device: device) }
        return try api.decode(SignInResponse.self, try await api.call(.signIn, json: user.signInRequest(device: device)))
    }
}
