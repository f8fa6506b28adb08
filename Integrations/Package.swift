// swift-tools-version: 6.0
// Adapters to the server ecosystem: swift-log, swift-metrics, swift-distributed-tracing and
// swift-service-lifecycle. A nested package (like Benchmarks/), so the library's own manifest keeps zero
// dependencies: each adapter is one short file built on the library's public hooks (CommandLogging, a
// DurableObserver, DurableRunOptions.context, DurableWorker), to depend on or to copy into your target.
// Build and test: cd Integrations && swift test
import PackageDescription

let package = Package(
    name: "Integrations",
    platforms: [.macOS(.v14), .iOS(.v17)],
    products: [
        .library(name: "DurableLogging", targets: ["DurableLogging"]),
        .library(name: "DurableMetrics", targets: ["DurableMetrics"]),
        .library(name: "DurableTracing", targets: ["DurableTracing"]),
        .library(name: "DurableServiceLifecycle", targets: ["DurableServiceLifecycle"]),
    ],
    dependencies: [
        .package(name: "AwesomeCommand", path: ".."),
        .package(url: "https://github.com/apple/swift-log", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
    ],
    targets: [
        .target(
            name: "DurableLogging",
            dependencies: [
                .product(name: "CommandCore", package: "AwesomeCommand"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        .target(
            name: "DurableMetrics",
            dependencies: [
                .product(name: "CommandDurable", package: "AwesomeCommand"),
                .product(name: "Metrics", package: "swift-metrics"),
            ]),
        .target(
            name: "DurableTracing",
            dependencies: [
                .product(name: "CommandDurable", package: "AwesomeCommand"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]),
        .target(
            name: "DurableServiceLifecycle",
            dependencies: [
                .product(name: "CommandDurable", package: "AwesomeCommand"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]),
        .testTarget(
            name: "IntegrationsTests",
            dependencies: [
                "DurableLogging", "DurableMetrics", "DurableTracing", "DurableServiceLifecycle",
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ]),
    ],
    swiftLanguageModes: [.v6]
)
