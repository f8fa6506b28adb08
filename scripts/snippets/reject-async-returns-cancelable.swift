// must not compile
// expect-error: 'nil' is not compatible with closure result type 'Void'
// The async sink form completes when its closure returns; it has no cancelable to return.
import CommandCore
import Foundation

let command = Command<Int>(async: { result in
    result.send(1)
    return nil
})
