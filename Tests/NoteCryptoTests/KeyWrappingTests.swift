import CSodium
import MiniFlake
import Testing
import TestSupport

@testable import NoteCrypto

@Suite struct KeyWrappingTests {
    static let parameters = try! KDFParameters(cost: .insecureForTesting, salt: sequence(from: 0, count: 16))

    static func wrapKey(_ password: String) -> WrapKey {
        try! PasswordKDF.deriveKeys(password: password, parameters: parameters, policy: .allowInsecureForTesting).wrapKey
    }

    let key = AccountKey.generate(account: Fixture.account)

    @Test("Wrapped by the password: unwraps with the same password, not with another (an operator's reset)")
    func passwordWrap() throws {
        let wrapped = key.wrapped(by: Self.wrapKey("old password"))
        #expect(wrapped.bytes.count == WrappedAccountKey.byteCount && WrappedAccountKey.byteCount == 82)
        #expect(wrapped.wrapper == .password && wrapped.generation == 1 && wrapped.wrapperGeneration == nil)
        #expect(try wrapped.unwrap(account: Fixture.account, with: Self.wrapKey("old password")) == key)
        #expect(error { try wrapped.unwrap(account: Fixture.account, with: Self.wrapKey("new password")) } == .doesNotAuthenticate(.wrappedAccountKey))
        // The text form round-trips (110 characters).
        #expect(wrapped.text.utf8.count == 110)
        #expect(try WrappedAccountKey(text: wrapped.text) == wrapped)
    }

    @Test("The associated data binds the account, the generation and the purpose")
    func bindings() throws {
        let wrapKey = Self.wrapKey("pw")
        let wrapped = key.wrapped(by: wrapKey)
        // Another account.
        #expect(error { try wrapped.unwrap(account: Fixture.otherAccount, with: wrapKey) } == .doesNotAuthenticate(.wrappedAccountKey))
        // Relabelled as another generation.
        var bytes = wrapped.bytes
        bytes[5] = 2
        #expect(error { try WrappedAccountKey(decoding: bytes).unwrap(account: Fixture.account, with: wrapKey) } == .doesNotAuthenticate(.wrappedAccountKey))
        // Relabelled as wrapped by the recovery key: refused by kind, and a recovery key with the same bytes as the
        // wrap key would still not open it (another purpose in the associated data).
        bytes = wrapped.bytes
        bytes[1] = WrappedAccountKey.Wrapper.recoveryKey.rawValue
        let relabelled = try WrappedAccountKey(decoding: bytes)
        #expect(error { try relabelled.unwrap(account: Fixture.account, with: wrapKey) } == .wrongWrapper(expected: .password, found: .recoveryKey))
        let sameAEADKey = WrappedAccountKey.seal(key, wrapper: .password, wrapperGeneration: 0, wrappingKey: wrapKey.secret)
        var asRecovery = sameAEADKey.bytes
        asRecovery[1] = 2
        #expect(error {
            try WrappedAccountKey(decoding: asRecovery).open(account: Fixture.account, wrappingKey: wrapKey.secret)
        } == .doesNotAuthenticate(.wrappedAccountKey))
        // Every byte after the header is authenticated.
        for index in WrappedAccountKey.headerByteCount..<WrappedAccountKey.byteCount {
            var tampered = wrapped.bytes
            tampered[index] ^= 0x20
            #expect(error { try WrappedAccountKey(decoding: tampered).unwrap(account: Fixture.account, with: wrapKey) } == .doesNotAuthenticate(.wrappedAccountKey), "byte \(index)")
        }
    }

    @Test("Known answers: wrapped by an account key and by a recovery key (known_answers.py)")
    func knownAnswers() throws {
        let inner = Fixture.key(generation: 2, bytes: sequence(from: 0x20, count: 32))
        let byAccountKey = WrappedAccountKey.seal(
            inner, wrapper: .accountKey, wrapperGeneration: 1, wrappingKey: Fixture.key().secret, nonce: sequence(from: 0x40, count: 24))
        #expect(
            byAccountKey.text
                == "AQMAAAACAAAAAUBBQkNERUZHSElKS0xNTk9QUVJTVFVWV9EtUdd_1dJ90ztd-NqDs3oCdkBdMXGq2_KDzzd-aDP3X1oo2uU5IaaeFRuP41_fRQ")
        #expect(try byAccountKey.unwrap(with: AccountKeyRing(Fixture.key())) == inner)
        let recovery = try RecoveryKey(parsing: "000G-40R4-0M30-E209-185G-R38E-1W81-24GK-2GAH-C5RR-34D1-P70X-3RFG-R9AT")
        let byRecovery = WrappedAccountKey.seal(
            inner, wrapper: .recoveryKey, wrapperGeneration: 0, wrappingKey: recovery.wrappingSecret, nonce: sequence(from: 0x40, count: 24))
        #expect(
            byRecovery.text
                == "AQIAAAACAAAAAEBBQkNERUZHSElKS0xNTk9QUVJTVFVWV0rf_0W03Tpu6wclkbZHjxEDsj0R60rYitBUZemt2BrCIM8l3GZAhF6KE-wNrcU-1Q")
        #expect(try byRecovery.unwrap(account: Fixture.account, with: recovery) == inner)
    }

    @Test("Wrapped by one key, unwrapped with another: refused (another recovery key, another generation's key, the wrong kind)")
    func wrongKeys() throws {
        let recovery = RecoveryKey.generate()
        let byRecovery = key.wrapped(by: recovery)
        #expect(try byRecovery.unwrap(account: Fixture.account, with: recovery) == key)
        #expect(error { try byRecovery.unwrap(account: Fixture.account, with: RecoveryKey.generate()) } == .doesNotAuthenticate(.wrappedAccountKey))
        #expect(error { try byRecovery.unwrap(account: Fixture.account, with: Self.wrapKey("pw")) } == .wrongWrapper(expected: .password, found: .recoveryKey))
        #expect(error { try byRecovery.unwrap(with: AccountKeyRing(key)) } == .wrongWrapper(expected: .accountKey, found: .recoveryKey))

        // Older generations kept reachable from the newest: generation 1 wrapped by generation 2.
        let newer = try key.rotated()
        let history = try key.wrapped(by: newer)
        #expect(history.generation == 1 && history.wrapperGeneration == 2)
        #expect(try history.unwrap(with: AccountKeyRing(newer)) == key)
        #expect(error { try history.unwrap(with: AccountKeyRing(key)) } == .unknownKeyGeneration(.wrappedAccountKey, 2))
        // A ring of the other account holding a generation 2: the account is bound.
        let stranger = try AccountKey.generate(account: Fixture.otherAccount).rotated()
        #expect(error { try history.unwrap(with: AccountKeyRing(stranger)) } == .doesNotAuthenticate(.wrappedAccountKey))
        #expect(error { try key.wrapped(by: stranger) } == .keyOfAnotherAccount(expected: Fixture.account, found: Fixture.otherAccount))
        #expect(error { try key.wrapped(by: key) } == .invalidGeneration(1))
    }

    @Test("The wrapped-key decoder checks every header field")
    func decoder() throws {
        let valid = key.wrapped(by: Self.wrapKey("pw")).bytes
        #expect(error { try WrappedAccountKey(decoding: Array(valid.dropLast())) } == .malformed(.wrappedAccountKey, .tooShort(length: 81, minimum: 82)))
        #expect(error { try WrappedAccountKey(decoding: valid + [0]) } == .malformed(.wrappedAccountKey, .tooLong(length: 83, maximum: 82)))
        func with(_ index: Int, _ value: UInt8, in bytes: [UInt8] = valid) -> [UInt8] {
            var copy = bytes
            copy[index] = value
            return copy
        }
        #expect(error { try WrappedAccountKey(decoding: with(0, 9)) } == .unsupportedVersion(.wrappedAccountKey, 9))
        #expect(error { try WrappedAccountKey(decoding: with(1, 4)) } == .malformed(.wrappedAccountKey, .invalidField("wrapper 4")))
        #expect(error { try WrappedAccountKey(decoding: with(1, 0)) } == .malformed(.wrappedAccountKey, .invalidField("wrapper 0")))
        #expect(error { try WrappedAccountKey(decoding: with(5, 0)) } == .malformed(.wrappedAccountKey, .invalidField("generation 0")))
        #expect(error { try WrappedAccountKey(decoding: with(9, 1)) } == .malformed(.wrappedAccountKey, .invalidField("wrapper generation 1 for the password")))
        // An account key wrapping needs a wrapper generation, not its own.
        let asAccountKey = with(1, 3)
        #expect(error { try WrappedAccountKey(decoding: asAccountKey) } == .malformed(.wrappedAccountKey, .invalidField("wrapper generation 0 for generation 1")))
        #expect(error { try WrappedAccountKey(decoding: with(9, 1, in: asAccountKey)) } == .malformed(.wrappedAccountKey, .invalidField("wrapper generation 1 for generation 1")))
        #expect(try WrappedAccountKey(decoding: with(9, 2, in: asAccountKey)).wrapperGeneration == 2)
        #expect(error { try WrappedAccountKey(text: "not base64!") } == .malformed(.wrappedAccountKey, .notBase64URL))
        #expect(error { try WrappedAccountKey(text: String(repeating: "A", count: 200)) } == .malformed(.wrappedAccountKey, .tooLong(length: 150, maximum: 82)))
    }

    @Test("Key rings: one account, one key per generation, the newest is current")
    func rings() throws {
        let second = try key.rotated()
        let third = try second.rotated()
        let ring = try AccountKeyRing(account: Fixture.account, keys: [second, third, key])
        #expect(ring.current == third && ring.generations == [1, 2, 3])
        #expect(ring.key(generation: 2) == second && ring.key(generation: 4) == nil)
        var copy = ring
        try copy.insert(second)  // already held: nothing changes
        #expect(copy.generations == [1, 2, 3])
        let impostor = try AccountKey(account: Fixture.account, generation: 2, restoringSecretBytes: randomBytes(32))
        #expect(error { try copy.insert(impostor) } == .conflictingGeneration(2))
        #expect(error { try copy.insert(AccountKey.generate(account: Fixture.otherAccount)) } == .keyOfAnotherAccount(expected: Fixture.account, found: Fixture.otherAccount))
        #expect(error { try AccountKeyRing(account: Fixture.otherAccount, keys: [key]) } == .keyOfAnotherAccount(expected: Fixture.otherAccount, found: Fixture.account))
        #expect(error { try AccountKeyRing(account: Fixture.account, keys: []) } == .invalidGeneration(0))
        #expect(error { try AccountKey(account: Fixture.account, generation: 0, restoringSecretBytes: randomBytes(32)) } == .invalidGeneration(0))
        #expect(error { try AccountKey(account: Fixture.account, generation: 1, restoringSecretBytes: randomBytes(31)) } == .invalidKeyLength(expected: 32, found: 31))
        let last = try AccountKey(account: Fixture.account, generation: .max, restoringSecretBytes: randomBytes(32))
        #expect(error { try last.rotated() } == .invalidGeneration(.max))
        // A key read back from the store is the same key.
        let stored = key.withSecretBytes { Array($0) }
        #expect(try AccountKey(account: Fixture.account, generation: 1, restoringSecretBytes: stored) == key)
    }
}

@Suite struct DeviceKeyTests {
    @Test("Known answer: RFC 7748 §6.1's X25519 key pairs restore to their public keys")
    func rfc7748() throws {
        let alice = try DeviceKeyPair(restoringSecretKey: hex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"))
        #expect(alice.publicKey.bytes == hex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"))
        let bob = try DeviceKeyPair(restoringSecretKey: hex("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb"))
        #expect(bob.publicKey.bytes == hex("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"))
    }

    @Test("A generated key pair restores from its stored secret key; public keys read back from their text")
    func storage() throws {
        let pair = DeviceKeyPair.generate()
        let restored = try DeviceKeyPair(restoringSecretKey: pair.withSecretKeyBytes { Array($0) })
        #expect(restored.publicKey == pair.publicKey)
        #expect(pair.publicKey.text.utf8.count == 43)
        #expect(try DevicePublicKey(text: pair.publicKey.text) == pair.publicKey)
        #expect(error { try DevicePublicKey(bytes: [1, 2]) } == .invalidKeyLength(expected: 32, found: 2))
        #expect(error { try DevicePublicKey(text: "AAAA") } == .invalidKeyLength(expected: 32, found: 3))
        #expect(error { try DevicePublicKey(text: "A=") } == .malformed(.devicePublicKey, .notBase64URL))
        #expect(error { try DeviceKeyPair(restoringSecretKey: [0]) } == .invalidKeyLength(expected: 32, found: 1))
        #expect(DeviceKeyPair.generate().publicKey != pair.publicKey)
    }

    @Test("A hand-over round trip: the new generation reaches the device it was sealed to, authenticated by the previous one")
    func handoverRoundTrip() throws {
        let first = AccountKey.generate(account: Fixture.account)
        let second = try first.rotated()
        let device = DeviceKeyPair.generate()
        let handover = try KeyHandover.seal(second, authenticatedBy: first, to: device.publicKey)
        #expect(handover.bytes.count == KeyHandover.byteCount && KeyHandover.byteCount == 130)
        let reread = try KeyHandover(text: handover.text)
        var ring = AccountKeyRing(first)
        let received = try reread.open(with: device, keys: ring)
        #expect(received == second)
        try ring.insert(received)
        #expect(ring.current == second)
    }

    @Test("A hand-over does not open for another device, without the previous generation, or altered")
    func handoverRefusals() throws {
        let first = AccountKey.generate(account: Fixture.account)
        let second = try first.rotated()
        let third = try second.rotated()
        let device = DeviceKeyPair.generate()
        let handover = try KeyHandover.seal(third, authenticatedBy: second, to: device.publicKey)
        // Another device (a revoked one) cannot open what was sealed to this one.
        #expect(error { try handover.open(with: DeviceKeyPair.generate(), keys: AccountKeyRing(second)) } == .doesNotAuthenticate(.keyHandover))
        // A device that missed a rotation applies the earlier hand-over first.
        #expect(error { try handover.open(with: device, keys: AccountKeyRing(first)) } == .unknownKeyGeneration(.wrappedAccountKey, 2))
        // The server alone cannot forge one: a key of its own, sealed to the device, authenticated by a key it made up.
        let forgedPrevious = try AccountKey(account: Fixture.account, generation: 2, restoringSecretBytes: randomBytes(32))
        let forged = try KeyHandover.seal(try forgedPrevious.rotated(), authenticatedBy: forgedPrevious, to: device.publicKey)
        #expect(error { try forged.open(with: device, keys: AccountKeyRing(second)) } == .doesNotAuthenticate(.wrappedAccountKey))
        // Any altered byte.
        for index in stride(from: 0, to: handover.bytes.count, by: 7) {
            var bytes = handover.bytes
            bytes[index] ^= 1
            #expect(error { try KeyHandover(decoding: bytes).open(with: device, keys: AccountKeyRing(second)) } == .doesNotAuthenticate(.keyHandover), "byte \(index)")
        }
        // Only a newer generation is handed over, only within one account.
        #expect(error { try KeyHandover.seal(first, authenticatedBy: second, to: device.publicKey) } == .notAHandover)
        #expect(error { try KeyHandover.seal(second, authenticatedBy: second, to: device.publicKey) } == .notAHandover)
        #expect(error { try KeyHandover(decoding: Array(handover.bytes.dropLast())) } == .malformed(.keyHandover, .tooShort(length: 129, minimum: 130)))
        // A low-order public key (all zeroes) is refused rather than sealed to.
        #expect(error { try KeyHandover.seal(second, authenticatedBy: first, to: try DevicePublicKey(bytes: [UInt8](repeating: 0, count: 32))) } == .invalidPublicKey)
    }

    @Test("A wrapped key sealed the other way round (newer wraps older) is not a hand-over")
    func historyIsNotAHandover() throws {
        let first = AccountKey.generate(account: Fixture.account)
        let second = try first.rotated()
        let device = DeviceKeyPair.generate()
        // Sealing by hand what seal(...) refuses to make.
        let history = try first.wrapped(by: second)
        var box = [UInt8](repeating: 0, count: KeyHandover.byteCount)
        _ = crypto_box_seal_bridge(&box, history.bytes, device.publicKey.bytes)
        #expect(error { try KeyHandover(decoding: box).open(with: device, keys: AccountKeyRing(second)) } == .notAHandover)
    }

    @Test("The recovery key's key pair receives hand-overs too (so rotations keep the recovery key useful)")
    func recoveryReceivesHandovers() throws {
        let recovery = RecoveryKey.generate()
        let first = AccountKey.generate(account: Fixture.account)
        let second = try first.rotated()
        let handover = try KeyHandover.seal(second, authenticatedBy: first, to: recovery.publicKey)
        // Recovering: the recovery key unwraps generation 1, then opens the hand-over of generation 2.
        let unwrapped = try first.wrapped(by: recovery).unwrap(account: Fixture.account, with: recovery)
        let parsed = try RecoveryKey(parsing: recovery.humanForm)
        #expect(try handover.open(with: parsed, keys: AccountKeyRing(unwrapped)) == second)
        #expect(error { try handover.open(with: RecoveryKey.generate(), keys: AccountKeyRing(unwrapped)) } == .doesNotAuthenticate(.keyHandover))
    }
}

/// `crypto_box_seal` for a test that must seal what ``KeyHandover`` refuses to.
func crypto_box_seal_bridge(_ output: inout [UInt8], _ message: [UInt8], _ publicKey: [UInt8]) -> Int32 {
    crypto_box_seal(&output, message, UInt64(message.count), publicKey)
}
