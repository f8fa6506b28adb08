// swift run Cancel
//
// Four ways a command ends early: its token's cancel(), Operation.cancel(), a CancelBag released with
// its owner, and a dependency that was cancelled (the dependent never runs).
import CommandCore
import Foundation

/// Work that would take 10 seconds; reports when its cancelable is cancelled.
func slow(_ name: String) -> Command<Int> {
    let command = Command<Int> { result in
        DispatchQueue.global().asyncAfter(deadline: .now() + 10) { result.succeed(1) }
        return BlockCancelable { print("  \(name): its work was cancelled") }
    }
    command.name = name
    return command
}

/// Runs `command`, lets `cancel` end it, waits for the terminal event.
func demo(_ title: String, _ command: Command<Int>, cancel: (any Cancelable) -> Void) {
    print(title)
    let ended = DispatchSemaphore(value: 0)
    let running = DispatchSemaphore(value: 0)
    command.observeState(on: .immediate) { state in if case .executing = state { running.signal() } }
    let token = command.execute(on: .immediate) { event in
        print("  event: \(event)")
        if event.isTerminal { ended.signal() }
    }
    running.wait()
    cancel(token)
    ended.wait()  // a command-line tool's own main thread: blocking here is fine
}

demo("1. the token returned by execute:", slow("token")) { token in token.cancel() }
let second = slow("operation")
demo("2. Operation.cancel():", second) { _ in second.cancel() }

print("3. a CancelBag released with its owner:")
final class Screen {
    let bag = CancelBag()
    deinit { print("  screen released") }
}
var screen: Screen? = Screen()
let third = slow("bag")
let thirdEnded = DispatchSemaphore(value: 0)
let thirdRunning = DispatchSemaphore(value: 0)
third.observeState(on: .immediate) { state in if case .executing = state { thirdRunning.signal() } }
third.execute(on: .immediate) { event in
    print("  event: \(event)")
    if event.isTerminal { thirdEnded.signal() }
}.store(in: screen!.bag)
thirdRunning.wait()
screen = nil
thirdEnded.wait()

print("4. a dependent of a cancelled command:")
let upload = slow("upload")
let notify = Command<Int> { result in
    print("  notify ran (it should not)")
    result.succeed(0)
    return nil
}
notify.name = "notify"
notify.addDependency(upload)
let uploading = DispatchSemaphore(value: 0)
upload.observeState(on: .immediate) { state in if case .executing = state { uploading.signal() } }
let notified = DispatchSemaphore(value: 0)
notify.execute(on: .immediate) { event in  // executes 'upload' first: it is a dependency
    print("  notify: \(event)")
    if event.isTerminal { notified.signal() }
}
uploading.wait()
print("  cancelling 'upload' while 'notify' waits for it")
upload.cancel()
notified.wait()
