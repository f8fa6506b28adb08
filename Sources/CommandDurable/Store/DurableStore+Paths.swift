import Foundation

// Where an SQLite store may be opened.
extension DurableStore {
    /// Refuses, before SQLite creates anything, a path that is a directory, a file or folder this process
    /// may not write (a store writes its file, and its `-wal` and `-shm` files beside it), or a folder that
    /// does not exist.
    static func checkPath(_ path: String) throws {
        guard path != ":memory:", !path.isEmpty else { return }
        let files = FileManager.default
        var isDirectory: ObjCBool = false
        let folder = (path as NSString).deletingLastPathComponent
        if files.fileExists(atPath: path, isDirectory: &isDirectory) {
            if isDirectory.boolValue {
                throw DurableError.storage(
                    message: "'\(path)' is a directory: give the path of a file in it (\(path)/work.sqlite)")
            }
            if !files.isWritableFile(atPath: path) {
                throw DurableError.storage(
                    message: "'\(path)' is read-only: a store writes to its file; make it writable or copy it")
            }
        } else if !folder.isEmpty, !files.fileExists(atPath: folder) {
            throw DurableError.storage(message: "the folder of '\(path)' does not exist: create '\(folder)' first")
        }
        if !folder.isEmpty, !files.isWritableFile(atPath: folder) {
            throw DurableError.storage(
                message: "the folder of '\(path)' is read-only: a store writes its -wal and -shm files beside "
                    + "its file; choose a writable folder")
        }
    }
}
