#!/usr/bin/env bash
# Coverage-guided fuzzing of the hand-written codecs and decoders with libFuzzer (swiftc -sanitize=fuzzer,address).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]   run each target for SECONDS (default 60); targets: push-request,
#                                           push-response, pull-response, note-envelope, wrapped-key,
#                                           recovery-key, note-payload (default all)
#   FUZZ_JOBS=N                             run N targets at once (default 1)
#
# The MiniFlake and NoteSyncProtocol sources are compiled (optimised, instrumented) into each target with the
# differential oracle of Tests/TestSupport/CodecOracle.swift and Fuzz/CodecFuzz.swift. Each target starts from
# its checked-in seed corpus Fuzz/corpus/<target>/ and writes what it discovers to .build/fuzz/corpus/<target>/
# (merge the interesting inputs back by hand: `<binary> -merge=1 Fuzz/corpus/<target> .build/fuzz/corpus/<target>`).
# A crash (a disagreement between a fast reader or writer and Foundation's coders) leaves its input in
# .build/fuzz/crash-* and makes the script exit 1. The corpus is replayed on every test run by CodecCorpusTests.
# The NoteCrypto targets (note-envelope, wrapped-key, recovery-key, note-payload) compile the NoteCrypto sources the same way
# (which reads NoteSyncProtocol's attachment manifests) against the system libsodium (Sources/CSodium's module map, -lsodium) with Tests/NoteCryptoTests/CryptoOracle.swift
# and Fuzz/CryptoFuzz.swift; their corpus is replayed by CryptoCorpusTests.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
codec_targets=(push-request push-response pull-response)
crypto_targets=(note-envelope wrapped-key recovery-key note-payload)
[ ${#targets[@]} -gt 0 ] || targets=("${codec_targets[@]}" "${crypto_targets[@]}")
out=.build/fuzz
mkdir -p "$out/modules"

flags=(-O -wmo -parse-as-library -sanitize=fuzzer,address -swift-version 6 -enable-upcoming-feature ExistentialAny)
if [ ! -f "$out/modules/NoteSyncProtocol.o" ] || [ -n "$(find Sources/MiniFlake Sources/NoteSyncProtocol Tests/TestSupport/CodecOracle.swift Fuzz/CodecFuzz.swift -newer "$out/modules/NoteSyncProtocol.o" -name '*.swift' | head -1)" ]; then
  echo "fuzz: compiling MiniFlake and NoteSyncProtocol (instrumented)" >&2
  swiftc "${flags[@]}" -module-name MiniFlake -emit-module -emit-module-path "$out/modules/MiniFlake.swiftmodule" \
    -c Sources/MiniFlake/*.swift -o "$out/modules/MiniFlake.o"
  swiftc "${flags[@]}" -I "$out/modules" -module-name NoteSyncProtocol -emit-module \
    -emit-module-path "$out/modules/NoteSyncProtocol.swiftmodule" \
    -c $(find Sources/NoteSyncProtocol -name '*.swift' | sort) -o "$out/modules/NoteSyncProtocol.o"
  for target in "${codec_targets[@]}"; do
    define="FUZZ_$(echo "$target" | tr 'a-z-' 'A-Z_')"
    # The oracle file imports MiniFlake and NoteSyncProtocol, like the target.
    swiftc "${flags[@]}" -I "$out/modules" -D "$define" -module-name CodecFuzz \
      Fuzz/CodecFuzz.swift Tests/TestSupport/CodecOracle.swift \
      "$out/modules/MiniFlake.o" "$out/modules/NoteSyncProtocol.o" -o "$out/fuzz-$target" 2> >(grep -v "Cannot export local symbol" >&2)
  done
fi

crypto_sources=(Sources/NoteCrypto Tests/NoteCryptoTests/CryptoOracle.swift Fuzz/CryptoFuzz.swift)
if [ ! -f "$out/modules/NoteCrypto.o" ] || [ "$out/modules/NoteSyncProtocol.o" -nt "$out/modules/NoteCrypto.o" ] \
  || [ -n "$(find "${crypto_sources[@]}" -newer "$out/modules/NoteCrypto.o" -name '*.swift' | head -1)" ]; then
  echo "fuzz: compiling NoteCrypto (instrumented, over the system libsodium)" >&2
  swiftc "${flags[@]}" -I "$out/modules" -I Sources/CSodium -module-name NoteCrypto -emit-module \
    -emit-module-path "$out/modules/NoteCrypto.swiftmodule" \
    -c $(find Sources/NoteCrypto -name '*.swift' | sort) -o "$out/modules/NoteCrypto.o"
  for target in "${crypto_targets[@]}"; do
    define="FUZZ_$(echo "$target" | tr 'a-z-' 'A-Z_')"
    swiftc "${flags[@]}" -I "$out/modules" -I Sources/CSodium -D "$define" -module-name CryptoFuzz \
      Fuzz/CryptoFuzz.swift Tests/NoteCryptoTests/CryptoOracle.swift \
      "$out/modules/MiniFlake.o" "$out/modules/NoteSyncProtocol.o" "$out/modules/NoteCrypto.o" -lsodium -o "$out/fuzz-$target" 2> >(grep -v "Cannot export local symbol" >&2)
  done
fi

run_one() {
  local target="$1"
  mkdir -p "$out/corpus/$target"
  echo "fuzz: $target for ${seconds}s" >&2
  SWIFT_BACKTRACE=enable=no "$out/fuzz-$target" -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=4096 \
    -artifact_prefix="$out/crash-$target-" -print_final_stats=1 \
    "$out/corpus/$target" "Fuzz/corpus/$target" > "$out/$target.log" 2>&1
}

status=0
pids=()
jobs="${FUZZ_JOBS:-1}"
for target in "${targets[@]}"; do
  run_one "$target" &
  pids+=("$!:$target")
  if [ ${#pids[@]} -ge "$jobs" ]; then
    for entry in "${pids[@]}"; do
      wait "${entry%%:*}" || { echo "fuzz: ${entry#*:} FAILED (see $out/${entry#*:}.log)" >&2; status=1; }
    done
    pids=()
  fi
done
for entry in "${pids[@]}"; do
  wait "${entry%%:*}" || { echo "fuzz: ${entry#*:} FAILED (see $out/${entry#*:}.log)" >&2; status=1; }
done
for target in "${targets[@]}"; do
  grep -E "^(stat::number_of_executed_units|stat::peak_rss_mb)|Done [0-9]+ runs|cov:" "$out/$target.log" | tail -3 | sed "s/^/fuzz: $target: /" >&2 || true
done
exit $status
