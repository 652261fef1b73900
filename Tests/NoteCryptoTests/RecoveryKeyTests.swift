import Testing

@testable import NoteCrypto

@Suite struct RecoveryKeyTests {
    /// known_answers.py: the recovery key of bytes 0x00...0x1f.
    static let knownForm = "000G-40R4-0M30-E209-185G-R38E-1W81-24GK-2GAH-C5RR-34D1-P70X-3RFG-R9AT"

    @Test("Known answer: bytes 0x00...0x1f give the human form and public key known_answers.py computes")
    func knownAnswer() throws {
        let key = RecoveryKey(secret: sequence(from: 0, count: 32).withUnsafeBytes { SecretBytes(copying: $0) })
        #expect(key.humanForm == Self.knownForm)
        #expect(try RecoveryKey(parsing: Self.knownForm) == key)
        #expect(key.publicKey.text == "gflXxdFH2Nsxs-C7WO20qAR6Rb6PlY-LmYCa-wOkUXE")
    }

    @Test("The human form: 14 groups of 4 Crockford base32 characters; it parses back to the same key")
    func roundTrip() throws {
        for _ in 0..<50 {
            let key = RecoveryKey.generate()
            let form = key.humanForm
            let groups = form.split(separator: "-")
            #expect(groups.count == 14 && groups.allSatisfy { $0.count == 4 })
            #expect(form.allSatisfy { $0 == "-" || "0123456789ABCDEFGHJKMNPQRSTVWXYZ".contains($0) })
            #expect(try RecoveryKey(parsing: form) == key)
        }
        #expect(RecoveryKey.generate() != RecoveryKey.generate())
    }

    @Test("Parsing tolerates case, spaces, line breaks, dashes and Crockford's look-alikes (I, L → 1, O → 0)")
    func tolerance() throws {
        let key = try RecoveryKey(parsing: Self.knownForm)
        let compact = Self.knownForm.replacing("-", with: "")
        #expect(try RecoveryKey(parsing: compact) == key)
        #expect(try RecoveryKey(parsing: Self.knownForm.lowercased()) == key)
        #expect(try RecoveryKey(parsing: "  " + Self.knownForm.replacing("-", with: " ") + "\n") == key)
        #expect(try RecoveryKey(parsing: Self.knownForm.replacing("-", with: "--\n")) == key)
        // Zeros typed as O (or o) and ones as I, i, L or l.
        let misread = compact.replacing("0", with: "O").replacing("1", with: "l")
        #expect(misread != compact)
        #expect(try RecoveryKey(parsing: misread) == key)
        #expect(try RecoveryKey(parsing: compact.replacing("1", with: "I").replacing("0", with: "o")) == key)
    }

    /// A fixed key, so the test is deterministic: a typo in the data characters passes a 20-bit checksum with
    /// probability 2⁻²⁰, which over 1,736 substitutions of a random key would fail one run in about 600.
    @Test("Typos are refused: all 1,736 single-character substitutions of a key fail its checksum, and a swap does")
    func typos() throws {
        let form = Array(Self.knownForm)
        let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ")
        for index in form.indices where form[index] != "-" {
            for replacement in alphabet where replacement != form[index] {
                var typo = form
                typo[index] = replacement
                #expect(error { try RecoveryKey(parsing: String(typo)) } == .recoveryKeyChecksumMismatch, "\(index): \(replacement)")
            }
        }
        // Two neighbouring, different characters swapped.
        let first = try #require(form.indices.dropLast().first { form[$0] != "-" && form[$0 + 1] != "-" && form[$0] != form[$0 + 1] })
        var swapped = form
        swapped.swapAt(first, first + 1)
        #expect(error { try RecoveryKey(parsing: String(swapped)) } == .recoveryKeyChecksumMismatch)
    }

    @Test("Clear errors for characters that cannot be there and for the wrong length")
    func errors() {
        #expect(error { try RecoveryKey(parsing: "U" + Self.knownForm.dropFirst()) } == .recoveryKeyInvalidCharacter("U", position: 1))
        #expect(error { try RecoveryKey(parsing: "000G-40R4-0M3!") } == .recoveryKeyInvalidCharacter("!", position: 14))
        #expect(error { try RecoveryKey(parsing: "000G-40R4-é") } == .recoveryKeyInvalidCharacter("é", position: 11))
        #expect(error { try RecoveryKey(parsing: String(Self.knownForm.dropLast())) } == .recoveryKeyWrongLength(55))
        #expect(error { try RecoveryKey(parsing: Self.knownForm + "0") } == .recoveryKeyWrongLength(57))
        #expect(error { try RecoveryKey(parsing: "") } == .recoveryKeyWrongLength(0))
        #expect(error { try RecoveryKey(parsing: " - ") } == .recoveryKeyWrongLength(0))
        // The 52nd character carries 1 bit of the key and 4 spare bits, which must be zero: `H` (10001) holds the
        // same key bit as `G` (10000) and the same checksum, but is another spelling, refused as a typo.
        var form = Array(Self.knownForm.replacing("-", with: ""))
        #expect(form[51] == "G")
        form[51] = "H"
        #expect(error { try RecoveryKey(parsing: String(form)) } == .recoveryKeyChecksumMismatch)
        #expect(NoteCryptoError.recoveryKeyChecksumMismatch.description == "This recovery key's checksum does not match: a character is mistyped.")
        #expect(NoteCryptoError.recoveryKeyInvalidCharacter("U", position: 1).description.contains("'U' (character 1)"))
    }
}
