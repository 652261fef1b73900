import Foundation
import Testing
import TestSupport

/// Replays the fuzz targets' checked-in corpus (`Fuzz/corpus/<target>/`, grown by `scripts/fuzz.sh`) through the
/// same differential oracle the fuzzers run (``CodecOracle``): every input the fuzzers kept, on every test run.
@Suite struct CodecCorpusTests {
    @Test(arguments: CodecOracle.Target.allCases)
    func corpusAgreesWithFoundation(_ target: CodecOracle.Target) throws {
        for input in try FuzzCorpus.inputs(of: target.rawValue) {
            #expect(CodecOracle.check(target, input.bytes) == nil, "\(input.name)")
        }
    }

    /// A valid body and garbage: both codecs agree on each.
    @Test func validAndGarbageBodiesAgree() {
        // Sanity: valid bodies agree, and garbage is refused by both.
        #expect(CodecOracle.check(.pushRequest, Data(#"{"changes":[]}"#.utf8)) == nil)
        #expect(CodecOracle.check(.pushRequest, Data("{".utf8)) == nil)
    }
}
