// swift-tools-version: 6.1
import PackageDescription

/// One settings array for every target: Swift 6 language mode (strict concurrency), plus the upcoming features
/// Hummingbird turns on for its own targets.
let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "FlakeNotes",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "MiniFlake", targets: ["MiniFlake"]),
        .library(name: "NoteSyncProtocol", targets: ["NoteSyncProtocol"]),
        .library(name: "NoteCrypto", targets: ["NoteCrypto"]),
        .library(name: "NoteSyncServer", targets: ["NoteSyncServer"]),
        .library(name: "NotesClient", targets: ["NotesClient"]),
        .library(name: "NoteSim", targets: ["NoteSim"]),
        .executable(name: "miniflake", targets: ["miniflake"]),
        .executable(name: "notesyncd", targets: ["notesyncd"]),
        .executable(name: "notes", targets: ["notes"]),
        .executable(name: "notes-sim", targets: ["notes-sim"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-auth.git", from: "2.5.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.3"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
    ],
    targets: [
        // Shared libraries.
        .target(name: "MiniFlake", path: "Sources/MiniFlake", swiftSettings: swiftSettings),
        .target(
            name: "MiniFlakeCommand",
            dependencies: ["MiniFlake", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            path: "Sources/MiniFlakeCommand",
            swiftSettings: swiftSettings
        ),
        .executableTarget(name: "miniflake", dependencies: ["MiniFlakeCommand"], path: "Sources/miniflake", swiftSettings: swiftSettings),
        .target(name: "NoteSyncProtocol", dependencies: ["MiniFlake"], path: "Sources/NoteSyncProtocol", swiftSettings: swiftSettings),
        // End-to-end encryption: libsodium (Debian's libsodium-dev, found through pkg-config) and the typed API over it
        // (which reads attachment manifests, NoteSyncProtocol's, in note payloads).
        .systemLibrary(name: "CSodium", path: "Sources/CSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),
        .target(name: "NoteCrypto", dependencies: ["CSodium", "MiniFlake", "NoteSyncProtocol"], path: "Sources/NoteCrypto", swiftSettings: swiftSettings),
        // The line diff and the three-way merges (texts, tags, flags): the server merges pushed edits, the device
        // shows and merges conflicts. Tags are compared by the wire module's TagRules.
        .target(name: "NoteMerge", dependencies: ["NoteSyncProtocol"], path: "Sources/NoteMerge", swiftSettings: swiftSettings),
        .target(
            name: "SQLiteSupport", dependencies: [.product(name: "GRDB", package: "GRDB.swift")], path: "Sources/SQLiteSupport",
            swiftSettings: swiftSettings),

        // Server.
        .target(
            name: "NoteSyncServer",
            dependencies: [
                "MiniFlake", "NoteSyncProtocol", "NoteMerge", "SQLiteSupport", "NoteCrypto",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdBcrypt", package: "hummingbird-auth"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            path: "Server/NoteSyncServer",
            swiftSettings: swiftSettings
        ),
        .executableTarget(name: "notesyncd", dependencies: ["NoteSyncServer"], path: "Server/notesyncd", swiftSettings: swiftSettings),

        // Client.
        .target(
            name: "NotesClient",
            dependencies: [
                "MiniFlake", "NoteSyncProtocol", "SQLiteSupport",
                // End-to-end encryption (issue 32): keys, envelopes, payloads; the device's merge of encrypted notes.
                "NoteCrypto", "NoteMerge",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                // SHA-256 of attachment chunks and files.
                .product(name: "Crypto", package: "swift-crypto"),
                // The waiting pull (WaitingPullTransport.swift): URLSession on Linux spins while a request waits.
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            path: "Client/NotesClient",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "NotesCommand",
            dependencies: ["NotesClient", "NoteMerge", "MiniFlake", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            path: "Client/NotesCommand",
            swiftSettings: swiftSettings
        ),
        .executableTarget(name: "notes", dependencies: ["NotesCommand"], path: "Client/notes", swiftSettings: swiftSettings),

        // The sync harness: the in-process server, the transports (fault injection too) and the process runner,
        // which the simulation ships and the tests share.
        .target(
            name: "SyncHarness",
            dependencies: [
                "MiniFlake", "NoteSyncProtocol", "NoteSyncServer", "NotesClient",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/SyncHarness",
            swiftSettings: swiftSettings
        ),
        // Test support, for the test targets only: the harness (re-exported), typed protocol calls, the daemon
        // launcher, the codec oracles, temporary directories.
        .target(
            name: "TestSupport",
            dependencies: ["MiniFlake", "NoteSyncProtocol", "NoteSyncServer", "NotesClient", "SyncHarness"],
            path: "Tests/TestSupport",
            swiftSettings: swiftSettings
        ),

        // Simulation.
        .target(
            name: "NoteSim",
            dependencies: [
                "MiniFlake", "NoteCrypto", "NoteSyncProtocol", "NoteSyncServer", "NotesClient", "SyncHarness",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Simulation/NoteSim",
            swiftSettings: swiftSettings
        ),
        .executableTarget(name: "notes-sim", dependencies: ["NoteSim"], path: "Simulation/notes-sim", swiftSettings: swiftSettings),

        // Tests.
        .testTarget(name: "MiniFlakeTests", dependencies: ["MiniFlake", "MiniFlakeCommand"], path: "Tests/MiniFlakeTests", swiftSettings: swiftSettings),
        .testTarget(
            name: "NoteCryptoTests", dependencies: ["NoteCrypto", "CSodium", "MiniFlake", "NoteSyncProtocol", "TestSupport"],
            path: "Tests/NoteCryptoTests", exclude: ["known_answers.py"], swiftSettings: swiftSettings),
        .testTarget(name: "NoteMergeTests", dependencies: ["NoteMerge", "MiniFlake", "TestSupport"], path: "Tests/NoteMergeTests", swiftSettings: swiftSettings),
        .testTarget(
            name: "NoteSyncProtocolTests",
            dependencies: ["NoteSyncProtocol", "MiniFlake", "TestSupport", .product(name: "Yams", package: "Yams")],
            path: "Tests/NoteSyncProtocolTests",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "NoteSyncServerTests",
            dependencies: [
                "NoteSyncServer", "NoteSyncProtocol", "MiniFlake", "TestSupport", "NoteCrypto",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
            ],
            path: "Tests/NoteSyncServerTests",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "NotesClientTests",
            dependencies: [
                "NotesClient", "NotesCommand", "NoteMerge", "NoteCrypto", "SyncHarness", "NoteSyncServer", "NoteSyncProtocol", "MiniFlake", "SQLiteSupport", "TestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Tests/NotesClientTests",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "NoteSimTests",
            dependencies: [
                "NoteSim", "MiniFlake", "NoteSyncProtocol", "NotesClient", "TestSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ], path: "Tests/NoteSimTests",
            swiftSettings: swiftSettings),
        .testTarget(
            name: "EndToEndTests",
            dependencies: ["NoteSyncProtocol", "MiniFlake", "NotesClient", "TestSupport"],
            path: "Tests/EndToEndTests",
            swiftSettings: swiftSettings
        ),
    ]
)
