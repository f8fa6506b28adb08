@_exported import Foundation

// The network module's one platform condition: on Linux (and Windows), URLSession and its types live
// in FoundationNetworking, which ships with the toolchain. Re-exported, so every file of this module
// and every client that imports CommandNetwork sees `URLSession`, `URLRequest` and `HTTPURLResponse`
// on every platform without a condition of its own.
#if canImport(FoundationNetworking)
    @_exported import FoundationNetworking
#endif
