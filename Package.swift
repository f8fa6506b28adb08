// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "AwesomeCommand",
    // The floors: `Duration` in the public API needs macOS 13 / iOS 16, and the typed combinators'
    // parameter packs, captured in escaping closures, need the runtime of macOS 14 / iOS 17.
    platforms: [.macOS(.v14), .iOS(.v17), .tvOS(.v17), .watchOS(.v10), .visionOS(.v1)],
    products: [
        .library(name: "CommandCore", targets: ["CommandCore"]),
        .library(name: "CommandGraph", targets: ["CommandGraph"]),
        .library(name: "CommandNetwork", targets: ["CommandNetwork"]),
        // A small HTTP/1.1 server on 127.0.0.1, for testing your network commands (and ours).
        .library(name: "CommandNetworkTesting", targets: ["CommandNetworkTesting"]),
        // Durable workflows: a graph of commands recorded in an embedded SQLite store, resumed after a crash.
        .library(name: "CommandDurable", targets: ["CommandDurable"]),
        // The same durable runs in a PostgreSQL database, worked by processes on many hosts.
        .library(name: "CommandDurablePostgres", targets: ["CommandDurablePostgres"]),
        // A throwaway PostgreSQL server on 127.0.0.1, for testing your durable workflows (and ours).
        .library(name: "CommandDurablePostgresTesting", targets: ["CommandDurablePostgresTesting"]),
        // `durable`: a store's runs from a shell (list, show, cancel, retry, prune).
        .executable(name: "durable", targets: ["DurableCommandLine"]),
    ],
    targets: [
        // Internal to the package (C11 atomics; `CommandCore` imports it with `internal import`).
        .target(name: "CommandAtomics"),
        .target(name: "CommandCore", dependencies: ["CommandAtomics"]),
        .target(name: "CommandGraph", dependencies: ["CommandCore"]),
        .target(name: "CommandNetwork", dependencies: ["CommandCore", "CommandGraph"]),
        .target(name: "CommandNetworkTesting"),
        // SQLite's C library from the system (pkg-config `sqlite3`; Debian's libsqlite3-dev). Apple
        // platforms use the SDK's `SQLite3` module instead.
        .systemLibrary(
            name: "CSQLite", path: "Sources/CSQLite", pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]
        ),
        .target(
            name: "CommandDurable",
            dependencies: [
                "CommandCore", "CommandGraph",
                .target(name: "CSQLite", condition: .when(platforms: [.linux, .android])),
            ]
        ),
        // PostgreSQL's client library from the system (pkg-config `libpq`; Debian's libpq-dev, Homebrew's
        // libpq).
        .systemLibrary(
            name: "CLibPQ", path: "Sources/CLibPQ", pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"]), .brew(["libpq"])]
        ),
        .target(name: "CommandDurablePostgres", dependencies: ["CommandCore", "CommandDurable", "CLibPQ"]),
        .target(name: "CommandDurablePostgresTesting"),
        .executableTarget(name: "DurableCommandLine", dependencies: ["CommandDurable", "CommandDurablePostgres"]),
        .executableTarget(
            name: "Quickstart",
            dependencies: ["CommandCore"],
            path: "Examples/Quickstart"
        ),
        .executableTarget(
            name: "RoundTrip",
            dependencies: ["CommandCore"],
            path: "Examples/RoundTrip"
        ),
        .executableTarget(
            name: "Diamond",
            dependencies: ["CommandGraph"],
            path: "Examples/Diamond"
        ),
        .executableTarget(
            name: "Bind",
            dependencies: ["CommandGraph"],
            path: "Examples/Bind"
        ),
        .executableTarget(
            name: "Cancel",
            dependencies: ["CommandGraph"],
            path: "Examples/Cancel"
        ),
        .executableTarget(
            name: "RunLoopCallbacks",
            dependencies: ["CommandGraph"],
            path: "Examples/RunLoopCallbacks"
        ),
        .executableTarget(
            name: "Checksum",
            dependencies: ["CommandGraph"],
            path: "Examples/Checksum"
        ),
        .target(name: "ExampleSupport", path: "Examples/ExampleSupport"),
        .executableTarget(
            name: "StreamMemory",
            dependencies: ["CommandGraph", "ExampleSupport"],
            path: "Examples/StreamMemory"
        ),
        .executableTarget(
            name: "GraphScale",
            dependencies: ["CommandCore", "CommandGraph", "ExampleSupport"],
            path: "Examples/GraphScale"
        ),
        .executableTarget(
            name: "CombinatorCost",
            dependencies: ["CommandGraph"],
            path: "Examples/CombinatorCost"
        ),
        .executableTarget(
            name: "ValuePath",
            dependencies: ["CommandGraph", "ExampleSupport"],
            path: "Examples/ValuePath"
        ),
        .executableTarget(
            name: "ThreadPeak",
            dependencies: ["CommandCore"],
            path: "Examples/ThreadPeak"
        ),
        .executableTarget(
            name: "ConditionChain",
            dependencies: ["CommandCore"],
            path: "Examples/ConditionChain"
        ),
        .executableTarget(
            name: "Workflow",
            dependencies: ["CommandGraph"],
            path: "Examples/Workflow"
        ),
        .executableTarget(
            name: "GroupScale",
            dependencies: ["CommandGraph"],
            path: "Examples/GroupScale"
        ),
        .executableTarget(
            name: "Fetch",
            dependencies: ["CommandGraph", "CommandNetwork", "CommandNetworkTesting"],
            path: "Examples/Fetch"
        ),
        .executableTarget(
            name: "Durable",
            dependencies: ["CommandDurable", "CommandNetwork", "CommandNetworkTesting"],
            path: "Examples/Durable"
        ),
        .executableTarget(
            name: "Onboarding",
            dependencies: ["CommandDurable"],
            path: "Examples/Onboarding"
        ),
        .executableTarget(
            name: "Inspector",
            dependencies: ["CommandDurable"],
            path: "Examples/Inspector"
        ),
        .executableTarget(
            name: "DurableCost",
            dependencies: ["CommandDurable"],
            path: "Examples/DurableCost"
        ),
        .executableTarget(
            name: "DurableWorkers",
            dependencies: ["CommandDurable", "CommandDurablePostgres", "CommandDurablePostgresTesting"],
            path: "Examples/DurableWorkers"
        ),
        .executableTarget(
            name: "DurableWorkersCost",
            dependencies: ["CommandDurable", "CommandDurablePostgres", "CommandDurablePostgresTesting"],
            path: "Examples/DurableWorkersCost"
        ),
        .executableTarget(
            name: "ReadmeSnippet",
            dependencies: ["CommandCore", "CommandNetwork"],
            path: "Examples/ReadmeSnippet"
        ),
        .testTarget(name: "CommandCoreTests", dependencies: ["CommandCore", "CommandTestSupport"]),
        .target(
            name: "CommandTestSupport",
            dependencies: ["CommandCore"],
            path: "Tests/CommandTestSupport"
        ),
        .testTarget(name: "CommandGraphTests", dependencies: ["CommandGraph", "CommandTestSupport"]),
        .testTarget(
            name: "CommandDurableTests",
            // DurableKillWorker: the child process the kill tests start, kill and start again; DurableCommandLine:
            // `durable`, run by its tests as a user runs it.
            dependencies: [
                "CommandDurable", "CommandDurablePostgres", "CommandDurablePostgresTesting", "CommandTestSupport",
                "DurableKillWorker", "DurableCommandLine",
            ],
            // A store made at schema version 1, opened and upgraded in place by DurableSchemaTests.
            resources: [.copy("Fixtures")]
        ),
        .executableTarget(
            name: "DurableKillWorker",
            dependencies: ["CommandDurable", "CommandDurablePostgres"],
            path: "Tests/DurableKillWorker"
        ),
        .testTarget(
            name: "CommandNetworkTests",
            dependencies: ["CommandNetwork", "CommandNetworkTesting", "CommandTestSupport"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
