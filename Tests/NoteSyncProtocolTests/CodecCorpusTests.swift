import Foundation
import Testing
import TestSupport

/// Replays the fuzz targets' checked-in corpus (`Fuzz/corpus/<target>/`, grown by `scripts/fuzz.sh`) through the
/// same differential oracle the fuzzers run (``CodecOracle``): every input the fuzzers kept, on every test run.
@Suite struct CodecCorpusTests {
    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fuzz/corpus")

    @Test(arguments: CodecOracle.Target.allCases)
    func corpusAgreesWithFoundation(_ target: CodecOracle.Target) throws {
        let folder = Self.corpus.appendingPathComponent(target.rawValue)
        let files = try FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)
        #expect(files.count >= 5, "the corpus of \(target.rawValue) is missing")
        for file in files {
            let data = try Data(contentsOf: file)
            #expect(CodecOracle.check(target, data) == nil, "\(target.rawValue)/\(file.lastPathComponent)")
        }
    }

    /// A valid body and garbage: both codecs agree on each.
    @Test func validAndGarbageBodiesAgree() {
        // Sanity: valid bodies agree, and garbage is refused by both.
        #expect(CodecOracle.check(.pushRequest, Data(#"{"changes":[]}"#.utf8)) == nil)
        #expect(CodecOracle.check(.pushRequest, Data("{".utf8)) == nil)
    }
}
