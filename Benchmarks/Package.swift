// swift-tools-version: 6.1
import PackageDescription

// Benchmarks for FlakeNotes, kept out of the main package so CI does not build them.
// Run from this folder: swift package --scratch-path .build-bench benchmark
// See Docs/PERFORMANCE.md for the figures and the exact commands.
let package = Package(
    name: "FlakeNotesBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "FlakeNotes", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark.git", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .executableTarget(
            name: "MiniFlakeBenchmarks",
            dependencies: [
                .product(name: "MiniFlake", package: "FlakeNotes"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "MiniFlakeBenchmarks",
            swiftSettings: [.swiftLanguageMode(.v6)],
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // The cost of notesyncd's metrics on the push path, in process (Docs/PERFORMANCE.md).
        .executableTarget(
            name: "MetricsCost",
            dependencies: [.product(name: "NoteSyncServer", package: "FlakeNotes")],
            path: "MetricsCost",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // The client side of an attachment upload or download as a process of its own (Benchmarks/attachments).
        .executableTarget(
            name: "AttachmentTransfer",
            dependencies: [
                .product(name: "NotesClient", package: "FlakeNotes"), .product(name: "NoteSyncProtocol", package: "FlakeNotes"),
            ],
            path: "AttachmentTransfer",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // Sustained generation past the drift bound, and a plain-loop cross-check of the burst figures.
        .executableTarget(
            name: "MiniFlakeSustained",
            dependencies: [.product(name: "MiniFlake", package: "FlakeNotes")],
            path: "MiniFlakeSustained",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
