// swift-tools-version: 6.1
// The benchmark suites, a nested package so the library's own manifest keeps zero dependencies.
// Run: cd Benchmarks && swift package benchmark
import PackageDescription

let package = Package(
    name: "Benchmarks",
    // package-benchmark needs macOS 13; the `Locks` suite measures `Synchronization.Mutex` (macOS 15).
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "AwesomeCommand", path: ".."),
        .package(url: "https://github.com/ordo-one/package-benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/OpenCombine/OpenCombine", from: "0.14.0"),
        .package(url: "https://github.com/apple/swift-async-algorithms", from: "1.1.4"),
    ],
    targets: [
        .executableTarget(
            name: "Core",
            dependencies: [
                .product(name: "Benchmark", package: "package-benchmark"),
                .product(name: "CommandGraph", package: "AwesomeCommand"),
            ],
            path: "Benchmarks/Core",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "package-benchmark")]
        ),
        .executableTarget(
            name: "Graph",
            dependencies: [
                .product(name: "Benchmark", package: "package-benchmark"),
                .product(name: "CommandGraph", package: "AwesomeCommand"),
            ],
            path: "Benchmarks/Graph",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "package-benchmark")]
        ),
        .executableTarget(
            name: "Combinators",
            dependencies: [
                .product(name: "Benchmark", package: "package-benchmark"),
                .product(name: "CommandGraph", package: "AwesomeCommand"),
                .product(name: "OpenCombine", package: "OpenCombine"),
                .product(name: "AsyncAlgorithms", package: "swift-async-algorithms"),
            ],
            path: "Benchmarks/Combinators",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "package-benchmark")]
        ),
        // Not a benchmark suite: the map-chain harness (interleaved trials, set-up timed apart).
        .executableTarget(
            name: "Harness",
            dependencies: [
                .product(name: "CommandGraph", package: "AwesomeCommand"),
                .product(name: "OpenCombine", package: "OpenCombine"),
            ],
            path: "Benchmarks/Harness"
        ),
        .executableTarget(
            name: "Locks",
            dependencies: [
                .product(name: "Benchmark", package: "package-benchmark"),
                .product(name: "CommandGraph", package: "AwesomeCommand"),
            ],
            path: "Benchmarks/Locks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "package-benchmark")]
        ),
        .executableTarget(
            name: "Network",
            dependencies: [
                .product(name: "Benchmark", package: "package-benchmark"),
                .product(name: "CommandNetwork", package: "AwesomeCommand"),
                .product(name: "CommandNetworkTesting", package: "AwesomeCommand"),
            ],
            path: "Benchmarks/Network",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "package-benchmark")]
        ),
    ]
)
