// swift-tools-version: 6.0
// A tool of the repository's CI, not part of the library (whose manifest stays dependency-free): parses
// Swift files with the Swift 6.0 parser (swift-syntax 600.0.1) and fails on any diagnostic. See
// scripts/check-swift60.sh.
import PackageDescription

let package = Package(
    name: "Swift60Syntax",
    platforms: [.macOS(.v13)],
    dependencies: [
        .package(url: "https://github.com/swiftlang/swift-syntax", exact: "600.0.1")
    ],
    targets: [
        .executableTarget(
            name: "Swift60Syntax",
            dependencies: [
                .product(name: "SwiftParser", package: "swift-syntax"),
                .product(name: "SwiftParserDiagnostics", package: "swift-syntax"),
                .product(name: "SwiftDiagnostics", package: "swift-syntax"),
                .product(name: "SwiftSyntax", package: "swift-syntax"),
            ]
        )
    ],
    swiftLanguageModes: [.v6]
)
