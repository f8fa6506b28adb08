// swift run Bind
//
// The original's `bind:` chain: each step gets the previous command's last value (or its error) and
// returns the next command, or nil to stop. Returning a command for an error recovers from it.
import CommandGraph
import Foundation

struct Unavailable: Error, CustomStringConvertible {
    var description: String { "primary server unavailable" }
}

func fetch(_ what: String, from server: String, fails: Bool = false) -> Command<String> {
    let command = Command<String> { result in
        print("  run: fetch \(what) from \(server)")
        if fails { result.fail(Unavailable()) } else { result.succeed("\(what)@\(server)") }
        return nil
    }
    command.name = "fetch \(what)"
    return command
}

let chain = fetch("token", from: "primary").bind { index, previous, value, error in
    print(
        "  step \(index) ended: \(previous.displayName), value \(value ?? "none"), error \(error.map { "\($0)" } ?? "none")"
    )
    switch index {
    case 0: return fetch("profile", from: "primary", fails: true)  // uses the token
    case 1: return error != nil ? fetch("profile", from: "backup") : nil  // recovers from the error
    default: return nil  // done
    }
}

let done = DispatchSemaphore(value: 0)
chain.execute(on: .immediate) { event in
    print("chain event: \(event)")
    if event.isTerminal { done.signal() }
}
done.wait()  // this is a command-line tool's own main thread, not a pool thread
