// A libFuzzer target for one of NoteCrypto's hand-written decoders, chosen at build time (`-D FUZZ_NOTE_ENVELOPE`,
// `-D FUZZ_WRAPPED_KEY`, `-D FUZZ_NOTE_PAYLOAD` or `-D FUZZ_RECOVERY_KEY`); `scripts/fuzz.sh` builds and runs each. Every input goes through
// `CryptoOracle` (Tests/NoteCryptoTests/CryptoOracle.swift, compiled into this binary): the decoder must not trap,
// must refuse with the error its layout predicts, must accept only what round-trips, and nothing it accepts may open
// unless it was sealed with the oracle's keys. A broken property is a crash, so libFuzzer keeps the input.

#if FUZZ_NOTE_ENVELOPE
let target = CryptoOracle.Target.noteEnvelope
#elseif FUZZ_WRAPPED_KEY
let target = CryptoOracle.Target.wrappedKey
#elseif FUZZ_NOTE_PAYLOAD
let target = CryptoOracle.Target.notePayload
#else
let target = CryptoOracle.Target.recoveryKey
#endif

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let input = start.map { Array(UnsafeBufferPointer(start: $0, count: count)) } ?? []
    if let broken = CryptoOracle.check(target, input) {
        fatalError("\(target.rawValue): \(broken.debugDescription)")
    }
    return 0
}
