import CommandCore
import CommandNetwork

final class Add: Command<Int>, @unchecked Sendable {  // subclasses of Operation restate @unchecked Sendable
    let a: Int, b: Int
    init(_ a: Int, _ b: Int) { self.a = a; self.b = b; super.init() }
    override func run(_ result: CommandResult<Int>) -> (any Cancelable)? {
        result.succeed(a + b)  // onNext + onComplete
        return nil
    }
}

let greeting = Command<String> { result in  // no subclass: a closure
    result.succeed("hello")
    return nil  // or a Cancelable: what cancel() calls
}
let page = RequestCommand(url: URL(string: "https://www.swift.org")!)  // a request: Command<HTTPResponse>

Add(2, 3).execute { event in print(event) }  // value(5), completed: on the caller's queue
greeting.execute { event in print(event) }  // value("hello"), completed
let token = page.execute { event in print(event) }  // cancelled(...): its URLSessionTask is cancelled
token.cancel()  // same as page.cancel()
