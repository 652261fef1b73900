import Foundation
import Testing
import TestSupport

@testable import NoteCrypto

/// Replays the crypto fuzz targets' checked-in corpus (`Fuzz/corpus/<target>/`, grown by `scripts/fuzz.sh`) through
/// the properties the fuzzers check (``CryptoOracle``): every input the fuzzers kept, on every test run.
@Suite struct CryptoCorpusTests {
    @Test(arguments: CryptoOracle.Target.allCases)
    func corpusKeepsEveryProperty(_ target: CryptoOracle.Target) throws {
        for input in try FuzzCorpus.inputs(of: target.rawValue) {
            #expect(CryptoOracle.check(target, [UInt8](input.bytes)) == nil, "\(input.name)")
        }
    }

    @Test("The oracle accepts what the fixed keys sealed and catches a decoder that accepts too much")
    func oracleSanity() throws {
        let envelope = try NoteEnvelope.seal(plaintext: Array("seed".utf8), context: CryptoOracle.context, key: CryptoOracle.ring.current)
        #expect(CryptoOracle.check(.noteEnvelope, envelope.bytes) == nil)
        #expect(CryptoOracle.check(.noteEnvelope, Array(envelope.text.utf8)) == nil)
        #expect(CryptoOracle.expectedEnvelopeError([1, 0, 0, 0, 0] + [UInt8](repeating: 0, count: 40)) == .malformed(.noteEnvelope, .invalidField("key generation 0")))
        #expect(CryptoOracle.check(.recoveryKey, Array(RecoveryKey.generate().humanForm.lowercased().utf8)) == nil)
        #expect(CryptoOracle.check(.recoveryKey, Array("ß".utf8)) == nil)
        let handover = try KeyHandover.seal(try CryptoOracle.ring.current.rotated(), authenticatedBy: CryptoOracle.ring.current, to: CryptoOracle.device.publicKey)
        #expect(CryptoOracle.check(.wrappedKey, handover.bytes) == nil)
        #expect(CryptoOracle.check(.wrappedKey, CryptoOracle.ring.current.wrapped(by: CryptoOracle.wrapKey).bytes) == nil)
    }
}
