// A libFuzzer target for one hand-written codec, chosen at build time (`-D FUZZ_PUSH_REQUEST`,
// `-D FUZZ_PUSH_RESPONSE` or `-D FUZZ_PULL_RESPONSE`); `scripts/fuzz.sh` builds and runs each. Every input goes
// through `CodecOracle` (Tests/TestSupport/CodecOracle.swift, compiled into this binary): the fast reader must
// accept only what JSONDecoder accepts, with the same value, and the writer must write JSONEncoder's bytes. A
// disagreement is a crash, so libFuzzer keeps the input.
import Foundation

#if FUZZ_PUSH_REQUEST
let target = CodecOracle.Target.pushRequest
#elseif FUZZ_PUSH_RESPONSE
let target = CodecOracle.Target.pushResponse
#else
let target = CodecOracle.Target.pullResponse
#endif

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let data = start.map { Data(bytes: $0, count: count) } ?? Data()
    if let difference = CodecOracle.check(target, data) {
        fatalError("\(target.rawValue): \(difference)")
    }
    return 0
}
