// swift run RunLoopCallbacks
//
// A thread that runs its own RunLoop (like an app's UI thread) executes commands and gets their
// callbacks on itself: the original's "callback on the calling thread", whatever thread did the work.
import CommandCore
import Foundation

/// Counts finished commands; only touched on the UI thread, by the callbacks below.
final class Finished: @unchecked Sendable {
    var count = 0
}

let ui = Thread {
    let loop = RunLoop.current
    loop.add(Timer(timeInterval: 3600, repeats: true) { _ in }, forMode: .default)  // keeps the loop alive
    let me = ObjectIdentifier(Thread.current)
    let finished = Finished()
    // Start the commands from inside the running loop, as a UI event handler would.
    loop.perform {
        for index in 1...3 {
            let command = Command<String> { result in
                DispatchQueue.global().async {
                    let worker = ObjectIdentifier(Thread.current) == me ? "the UI thread" : "a pool thread"
                    result.succeed("work \(index) done on \(worker)")
                }
                return nil
            }
            command.execute { (event: CommandEvent<String>) in  // captures this thread's run loop
                let here = ObjectIdentifier(Thread.current) == me
                print("callback on the UI thread: \(here) -> \(event)")
                if event.isTerminal {
                    finished.count += 1
                    if finished.count == 3 { exit(0) }
                }
            }
        }
    }
    while true { _ = loop.run(mode: .default, before: .distantFuture) }
}
ui.start()
DispatchQueue.main.asyncAfter(deadline: .now() + 30) {
    print("timed out")
    exit(1)
}
dispatchMain()
