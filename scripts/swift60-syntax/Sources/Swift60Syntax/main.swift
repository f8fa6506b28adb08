import Foundation
import SwiftDiagnostics
import SwiftParser
import SwiftParserDiagnostics
import SwiftSyntax

// Checks that Swift files are within Swift 6.0, the lowest version the README names. Two passes over
// each file named on the command line:
// 1. the Swift 6.0 parser (swift-syntax 600.0.1): any diagnostic fails (a trailing comma in an argument
//    list, a tuple, a generic or condition list, `InlineArray`'s value generics, `[3 of Int]`,
//    `nonisolated(nonsending)`, ...);
// 2. what that parser accepts but Swift 6.0 does not compile, found in its syntax tree (see `Newer`).
// Prints `path:line:column: message` for each; exits 1 if any file has one, 2 if a file cannot be read.

/// Constructs the 6.0 parser accepts that need a later compiler.
final class Newer: SyntaxVisitor {
    private(set) var findings: [(AbsolutePosition, String)] = []
    private static let newerTypes: [String: String] = [
        "InlineArray": "InlineArray needs Swift 6.2",
        "Span": "Span needs Swift 6.2", "MutableSpan": "MutableSpan needs Swift 6.2",
        "RawSpan": "RawSpan needs Swift 6.2", "MutableRawSpan": "MutableRawSpan needs Swift 6.2",
        "OutputSpan": "OutputSpan needs Swift 6.2",
    ]

    init() { super.init(viewMode: .sourceAccurate) }

    private func report(_ node: some SyntaxProtocol, _ message: String) {
        findings.append((node.positionAfterSkippingLeadingTrivia, message))
    }

    override func visit(_ node: FunctionParameterListSyntax) -> SyntaxVisitorContinueKind {
        if node.last?.trailingComma != nil {
            report(node.last!, "a trailing comma in a parameter list needs Swift 6.1")
        }
        return .visitChildren
    }

    override func visit(_ node: EnumCaseParameterListSyntax) -> SyntaxVisitorContinueKind {
        if node.last?.trailingComma != nil {
            report(node.last!, "a trailing comma in an enum case's parameters needs Swift 6.1")
        }
        return .visitChildren
    }

    override func visit(_ node: AttributeSyntax) -> SyntaxVisitorContinueKind {
        let name = node.attributeName.trimmedDescription
        if name == "concurrent" { report(node, "@concurrent needs Swift 6.2") }
        if name == "abi" { report(node, "@abi needs Swift 6.2") }
        return .visitChildren
    }

    override func visit(_ node: VariableDeclSyntax) -> SyntaxVisitorContinueKind {
        if node.bindingSpecifier.tokenKind == .keyword(.let),
            node.modifiers.contains(where: { $0.name.tokenKind == .keyword(.weak) })
        {
            report(node, "`weak let` needs Swift 6.2")
        }
        return .visitChildren
    }

    override func visit(_ node: DeclModifierSyntax) -> SyntaxVisitorContinueKind {
        if node.name.tokenKind == .keyword(.nonisolated), node.detail?.detail.text == "nonsending" {
            report(node, "nonisolated(nonsending) needs Swift 6.2")
        }
        // The modifier's list belongs to the declaration it modifies.
        let declaration = node.parent?.parent
        let isType =
            [
                StructDeclSyntax.self, ClassDeclSyntax.self, EnumDeclSyntax.self, ExtensionDeclSyntax.self,
                ProtocolDeclSyntax.self, ActorDeclSyntax.self,
            ] as [any SyntaxProtocol.Type]
        if node.name.tokenKind == .keyword(.nonisolated), let declaration,
            isType.contains(where: { declaration.is($0) })
        {
            report(node, "`nonisolated` on a type or extension needs Swift 6.1")
        }
        return .visitChildren
    }

    override func visit(_ node: SuppressedTypeSyntax) -> SyntaxVisitorContinueKind {
        if node.type.trimmedDescription == "Escapable" { report(node, "~Escapable needs Swift 6.2") }
        return .visitChildren
    }

    override func visit(_ node: InheritedTypeSyntax) -> SyntaxVisitorContinueKind {
        if node.type.is(AttributedTypeSyntax.self),
            node.type.as(AttributedTypeSyntax.self)!.attributes.contains(where: {
                $0.as(AttributeSyntax.self)?.attributeName.trimmedDescription.hasSuffix("Actor") == true
            })
        {
            report(node, "an isolated conformance (`: @MainActor P`) needs Swift 6.2")
        }
        return .visitChildren
    }

    override func visit(_ node: IdentifierTypeSyntax) -> SyntaxVisitorContinueKind {
        if let message = Self.newerTypes[node.name.text] { report(node, message) }
        return .visitChildren
    }
}

var failures = 0
for path in CommandLine.arguments.dropFirst() {
    guard let data = FileManager.default.contents(atPath: path), let source = String(data: data, encoding: .utf8)
    else {
        print("\(path): cannot be read")
        exit(2)
    }
    let tree = Parser.parse(source: source)
    let converter = SourceLocationConverter(fileName: path, tree: tree)
    var messages: [String] = []
    for diagnostic in ParseDiagnosticsGenerator.diagnostics(for: tree) {
        let location = diagnostic.location(converter: converter)
        messages.append("\(path):\(location.line):\(location.column): Swift 6.0 parser: \(diagnostic.message)")
    }
    let newer = Newer()
    newer.walk(tree)
    for (position, message) in newer.findings {
        let location = converter.location(for: position)
        messages.append("\(path):\(location.line):\(location.column): \(message)")
    }
    if messages.isEmpty { continue }
    failures += 1
    for message in messages { print(message) }
}
exit(failures == 0 ? 0 : 1)
