// must compile; await: command
// expect: value(42)
// expect: completed
// An async function's result as the command's one value.
import CommandCore
import Foundation

func fetch() async throws -> Int { 42 }

let command = Command { try await fetch() }
command.execute { print($0) }
