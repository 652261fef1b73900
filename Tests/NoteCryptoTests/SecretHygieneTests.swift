import Testing

@testable import NoteCrypto

@Suite struct SecretHygieneTests {
    /// Every way Swift prints a value: interpolation, `String(reflecting:)` and `dump`.
    func printed(_ value: Any) -> String {
        var dumped = ""
        dump(value, to: &dumped)
        return "\(value) \(String(reflecting: value)) \(dumped)"
    }

    @Test("No secret key type prints a byte of its secret, in any form")
    func nothingPrinted() throws {
        let keyBytes = sequence(from: 0xA0, count: 32)
        let key = Fixture.key(bytes: keyBytes)
        let keys = try PasswordKDF.deriveKeys(
            password: "pw", parameters: try KDFParameters(cost: .insecureForTesting, salt: sequence(from: 0, count: 16)),
            policy: .allowInsecureForTesting)
        let recovery = RecoveryKey.generate()
        let device = try DeviceKeyPair(restoringSecretKey: keyBytes)
        let secretForms = [
            keyBytes.withUnsafeBytes { Hex.encode($0) }, Base64URL.encode(keyBytes), "\(keyBytes)", "160, 161, 162",
            keys.authKey.serverPassword, keys.wrapKey.secret.withUnsafeBytes { Hex.encode($0) },
            recovery.humanForm, String(recovery.humanForm.prefix(9)),
        ]
        let values: [Any] = [key, AccountKeyRing(key), keys, keys.authKey, keys.wrapKey, recovery, device, key.secret]
        for value in values {
            let text = printed(value)
            for secret in secretForms {
                #expect(!text.contains(secret), "\(type(of: value)) printed \(secret): \(text)")
            }
        }
        #expect("\(key)" == "AccountKey(account 1001, generation 1, <redacted>)")
        #expect("\(keys.authKey)" == "AuthKey(<redacted>)")
        #expect("\(recovery)" == "RecoveryKey(<redacted>)")
        // Public keys print, as they may.
        #expect("\(device)".contains(device.publicKey.text))
    }

    @Test("Secret keys compare in constant time by content; constantTimeEquals compares lengths first")
    func comparisons() {
        #expect(constantTimeEquals([1, 2, 3], [1, 2, 3]))
        #expect(!constantTimeEquals([1, 2, 3], [1, 2, 4]))
        #expect(!constantTimeEquals([1, 2, 3], [1, 2]))
        #expect(constantTimeEquals([], []))
        #expect(Fixture.key() == Fixture.key())
        #expect(Fixture.key() != Fixture.key(bytes: sequence(from: 1, count: 32)))
        #expect(Fixture.key() != Fixture.key(generation: 2))
        #expect(Fixture.key() != Fixture.key(account: Fixture.otherAccount))
    }

    @Test("randomBytes: the requested length, different every time")
    func random() {
        #expect(randomBytes(0).isEmpty)
        let samples = (0..<100).map { _ in randomBytes(16) }
        #expect(samples.allSatisfy { $0.count == 16 })
        #expect(Set(samples).count == 100)
    }

    @Test("libsodium is initialised once, safely, from many threads at once")
    func concurrentFirstUse() async {
        let all = await withTaskGroup(of: [UInt8].self) { group in
            for _ in 0..<32 {
                group.addTask { AccountKey.generate(account: Fixture.account).withSecretBytes { Array($0) } }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(all.count == 32)
        #expect(Set(all).count == 32)
    }

    @Test("A guarded secret reads back what it was given and is released without tripping its guard pages")
    func guardedMemory() throws {
        // sodium_free wipes and unmaps the region when the last reference goes; from outside, what can be checked is
        // that the bytes lent out are the ones given and that the release neither traps nor touches a guard page.
        var secret: SecretBytes? = SecretBytes(copying: sequence(from: 7, count: 32).withUnsafeBytes { $0 })
        #expect(secret?.withUnsafeBytes { Array($0) } == sequence(from: 7, count: 32))
        #expect(secret?.count == 32)
        secret = nil
        #expect(secret == nil)
    }
}
