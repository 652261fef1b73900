import Foundation
import MiniFlake
import NoteCrypto
import NoteSyncProtocol
import TestSupport

@testable import NoteSyncServer

/// What a device of an encrypted account holds, made with NoteCrypto as a real client would (at the testing KDF
/// cost): the password's keys, the account key, the recovery key, a device key pair. Tests sign up with its
/// ``setup`` and push envelopes it seals.
struct EncryptedUser: Sendable {
    let username: String
    let accountID: FlakeID
    let kdf: KDFParameters
    let derived: DerivedKeys
    let accountKey: AccountKey
    let recovery: RecoveryKey
    let device: DeviceKeyPair
    let passwordKeyPair: DeviceKeyPair
    /// The sign-up's key material, wrapped once (each wrap draws a fresh nonce).
    let setup: EncryptionSetup
    let wrappedKey: WrappedAccountKey
    let recoveryWrappedKey: WrappedAccountKey

    /// A user whose account ID is minted at `now` (Unix milliseconds; the server's clock in the test).
    init(_ username: String, now: Int64 = testEpoch, sequence: Int = 0, password: String = "correct horse") {
        self.username = username
        accountID = try! FlakeID(milliseconds: now - FlakeID.epochUnixMilliseconds, sequence: sequence, instance: 3)
        kdf = .generate(cost: .insecureForTesting)
        derived = try! PasswordKDF.deriveKeys(password: password, parameters: kdf, policy: .allowInsecureForTesting)
        accountKey = .generate(account: accountID)
        recovery = .generate()
        device = .generate()
        passwordKeyPair = .generate()
        wrappedKey = accountKey.wrapped(by: derived.wrapKey)
        recoveryWrappedKey = accountKey.wrapped(by: recovery)
        setup = EncryptionSetup(
            accountID: accountID,
            kdf: KDFInfo(salt: kdf.saltText, opsLimit: Int64(kdf.cost.opsLimit), memLimit: Int64(kdf.cost.memLimitBytes)),
            wrappedKey: wrappedKey.text, recoveryWrappedKey: recoveryWrappedKey.text, recoveryPublicKey: recovery.publicKey.text,
            passwordPublicKey: passwordKeyPair.publicKey.text)
    }

    /// What the server gets in place of the password.
    var password: String { derived.authKey.serverPassword }

    var signUpRequest: SignUpRequest { SignUpRequest(username: username, password: password, encryption: setup) }

    func signInRequest(device name: String = "laptop", origin: FlakeID? = nil) -> SignInRequest {
        SignInRequest(username: username, password: password, deviceName: name, origin: origin, devicePublicKey: device.publicKey.text)
    }

    /// `plaintext` sealed for the edit `editID` of the note `(clientID, origin)`, in its text form.
    func seal(_ plaintext: String, clientID: Int64, origin: Int64 = 77, editID: Int64) -> String {
        try! NoteEnvelope.seal(
            plaintext: Array(plaintext.utf8),
            context: .init(account: accountID, clientID: id(clientID), origin: id(origin), editID: id(editID)), key: accountKey
        ).text
    }

    /// An encrypted change: `plaintext` sealed for exactly this edit.
    func change(
        _ clientID: Int64, origin: Int64 = 77, server: FlakeID? = nil, edit: Int64, plaintext: String, baseVersion: Int64? = nil
    ) -> NoteChange {
        TestSupport.change(
            clientID, origin: origin, server: server, edit: edit, text: seal(plaintext, clientID: clientID, origin: origin, editID: edit),
            baseVersion: baseVersion)
    }

    /// An encrypted delete (no text).
    func delete(_ clientID: Int64, origin: Int64 = 77, server: FlakeID? = nil, edit: Int64, baseVersion: Int64?) -> NoteChange {
        TestSupport.change(clientID, origin: origin, server: server, edit: edit, text: "", deleted: true, baseVersion: baseVersion)
    }

    /// The account as a store keeps it (for the conformance checks, which skip the service).
    var record: AccountRecord {
        AccountRecord(
            id: accountID, username: username, passwordHash: "$2b$04$hash", createdAt: testEpoch, encryption: .encrypted, keyGeneration: 1,
            keys: AccountKeys(
                kdf: kdf, wrappedKey: wrappedKey, recoveryWrappedKey: recoveryWrappedKey,
                recoveryPublicKey: recovery.publicKey, passwordPublicKey: passwordKeyPair.publicKey))
    }
}
