import Foundation
import Testing

@testable import NoteCrypto

@Suite struct PasswordKDFTests {
    let salt = sequence(from: 0, count: 16)
    let password = "correct horse battery staple"

    func cheap(salt: [UInt8]? = nil) -> KDFParameters {
        try! KDFParameters(cost: .insecureForTesting, salt: salt ?? self.salt)
    }

    func derive(_ password: String, _ parameters: KDFParameters) throws -> DerivedKeys {
        try PasswordKDF.deriveKeys(password: password, parameters: parameters, policy: .allowInsecureForTesting)
    }

    func wrapKeyHex(_ keys: DerivedKeys) -> String {
        keys.wrapKey.secret.withUnsafeBytes { Hex.encode($0) }
    }

    @Test("Known answer at the test cost: Argon2id and the BLAKE2b KDF match argon2-cffi and hashlib (known_answers.py)")
    func knownAnswerInsecureCost() throws {
        let keys = try derive(password, cheap())
        #expect(keys.authKey.serverPassword == "edd846d99cb468634ae4be68049b04b57004fa2f52dd7d74d78b6f0623070d5a")
        #expect(wrapKeyHex(keys) == "e4402b019e7416fea66a3c5d07efa7e6d1b04f563164e319bbc0505837fda996")
    }

    @Test("Known answer at the production cost (64 MiB, 3 passes), under the default policy")
    func knownAnswerProductionCost() throws {
        let parameters = try KDFParameters(cost: .production, salt: salt)
        let keys = try PasswordKDF.deriveKeys(password: password, parameters: parameters)
        #expect(keys.authKey.serverPassword == "e2f166187ff92fbadde8e80d702b0226f7ed77d1fdc327c05514404cb9667313")
        #expect(wrapKeyHex(keys) == "ee513ee307942298faed2f5db87e51c2672bc07f4f958d2ed0eb5fbaadd9b285")
    }

    @Test("Deterministic; authKey and wrapKey differ; another password or one bit of salt changes both")
    func determinism() throws {
        let keys = try derive(password, cheap())
        let again = try derive(password, cheap())
        #expect(keys.authKey == again.authKey && keys.wrapKey == again.wrapKey)
        #expect(keys.authKey.serverPassword != wrapKeyHex(keys))
        for bit in [0, 7, 64, 127] {
            var flipped = salt
            flipped[bit / 8] ^= 1 << (bit % 8)
            let other = try derive(password, cheap(salt: flipped))
            #expect(other.authKey != keys.authKey, "salt bit \(bit)")
            #expect(other.wrapKey != keys.wrapKey, "salt bit \(bit)")
        }
        let otherPassword = try derive(password + "!", cheap())
        #expect(otherPassword.authKey != keys.authKey && otherPassword.wrapKey != keys.wrapKey)
        // The cost is an input too.
        let costlier = try derive(password, try KDFParameters(cost: KDFCost(opsLimit: 2, memLimitBytes: 8 << 10), salt: salt))
        #expect(costlier.authKey != keys.authKey)
    }

    @Test("The password key pair is deterministic, the password's own, and apart from the other keys")
    func passwordKeyPair() throws {
        let keys = try derive(password, cheap())
        let again = try derive(password, cheap())
        #expect(keys.passwordKeyPair.publicKey == again.passwordKeyPair.publicKey)
        #expect(try derive("another password", cheap()).passwordKeyPair.publicKey != keys.passwordKeyPair.publicKey)
        let secret = keys.passwordKeyPair.withSecretKeyBytes { Hex.encode($0) }
        #expect(secret != wrapKeyHex(keys))
        #expect(secret != keys.authKey.serverPassword)
        // Restored from its secret half, it is the same pair (what a hand-over sealed to it is opened with).
        let restored = try DeviceKeyPair(restoringSecretKey: keys.passwordKeyPair.withSecretKeyBytes { Array($0) })
        #expect(restored.publicKey == keys.passwordKeyPair.publicKey)
    }

    @Test("The password is read as Unicode NFC: a composed and a decomposed 'é' give the same keys")
    func normalisation() throws {
        let composed = "caf\u{E9} au lait"
        let decomposed = "cafe\u{301} au lait"
        #expect(Array(composed.utf8) != Array(decomposed.utf8))
        #expect(try derive(composed, cheap()).wrapKey == derive(decomposed, cheap()).wrapKey)
        // The empty password is a password (the rules on length are the client's, not the KDF's).
        #expect(try derive("", cheap()).authKey != derive(" ", cheap()).authKey)
    }

    @Test("The server password is 64 lowercase hex characters: within bcrypt's 72 bytes, no NUL")
    func serverPassword() throws {
        let text = try derive(password, cheap()).authKey.serverPassword
        #expect(text.utf8.count == 64)
        #expect(text.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) })
    }

    @Test("The default policy refuses a downgrade below the minimum, and every policy refuses beyond the maximum")
    func policy() throws {
        func attempt(_ cost: KDFCost, _ policy: KDFPolicy = .enforceMinimum) -> NoteCryptoError? {
            error { try PasswordKDF.deriveKeys(password: "pw", parameters: try KDFParameters(cost: cost, salt: salt), policy: policy) }
        }
        #expect(attempt(.insecureForTesting) == .kdfTooWeak(opsLimit: 1, memLimitBytes: 8 << 10))
        #expect(attempt(KDFCost(opsLimit: 1, memLimitBytes: 64 << 20)) == .kdfTooWeak(opsLimit: 1, memLimitBytes: 64 << 20))
        #expect(attempt(KDFCost(opsLimit: 3, memLimitBytes: (64 << 20) - 1024)) == .kdfTooWeak(opsLimit: 3, memLimitBytes: (64 << 20) - 1024))
        #expect(KDFCost.minimum.meetsMinimum && KDFCost.production.meetsMinimum && !KDFCost.insecureForTesting.meetsMinimum)
        #expect(attempt(KDFCost(opsLimit: 11, memLimitBytes: 64 << 20)) == .kdfTooCostly(opsLimit: 11, memLimitBytes: 64 << 20))
        #expect(attempt(KDFCost(opsLimit: 3, memLimitBytes: 1 << 40)) == .kdfTooCostly(opsLimit: 3, memLimitBytes: 1 << 40))
        #expect(attempt(KDFCost(opsLimit: 3, memLimitBytes: 1 << 40), .allowInsecureForTesting) == .kdfTooCostly(opsLimit: 3, memLimitBytes: 1 << 40))
        // Below libsodium's own floor even the testing policy refuses.
        #expect(attempt(KDFCost(opsLimit: 0, memLimitBytes: 8 << 10), .allowInsecureForTesting) == .kdfTooWeak(opsLimit: 0, memLimitBytes: 8 << 10))
        #expect(attempt(KDFCost(opsLimit: 1, memLimitBytes: 1024), .allowInsecureForTesting) == .kdfTooWeak(opsLimit: 1, memLimitBytes: 1024))
        #expect(attempt(.insecureForTesting, .allowInsecureForTesting) == nil)
        #expect(NoteCryptoError.kdfTooWeak(opsLimit: 1, memLimitBytes: 8 << 10).description.contains("at least ops 2, 64 MiB"))
    }

    @Test("Salts are 16 bytes; fresh parameters get a random salt and the production cost")
    func salts() {
        #expect(error { try KDFParameters(cost: .production, salt: [1, 2, 3]) } == .invalidSalt(length: 3))
        #expect(error { try KDFParameters(cost: .production, salt: sequence(from: 0, count: 17)) } == .invalidSalt(length: 17))
        let fresh = KDFParameters.generate()
        #expect(fresh.cost == .production && fresh.salt.count == 16)
        #expect(KDFParameters.generate().salt != fresh.salt)
        #expect(KDFCost.production == KDFCost(opsLimit: 3, memLimitBytes: 64 << 20))
    }
}
