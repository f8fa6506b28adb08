// must compile; await: command
// expect: value(3)
// expect: completed
// The labelled async form, as the porting guide writes it.
import CommandCore
import Foundation

let command = Command<Int>(async: { result in
    result.send(3)
})
command.execute { print($0) }
