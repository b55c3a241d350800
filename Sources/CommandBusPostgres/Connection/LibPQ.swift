import CLibPQ
import Glibc

/// libpq, loaded with `dlopen` the first time the shared bus is used, not linked: it brings about
/// twenty libraries (TLS, Kerberos, LDAP) that would otherwise cost every `cmdbus` start a few
/// milliseconds, though most never touch PostgreSQL. `CLibPQ` gives the types only.
package struct LibPQ: @unchecked Sendable {
    // Function pointers resolved once, then only read.
    typealias Connection = OpaquePointer
    typealias Result = OpaquePointer

    let connectdb: @convention(c) (UnsafePointer<CChar>?) -> Connection?
    let connectdbParams: @convention(c) (UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<UnsafePointer<CChar>?>?, Int32) -> Connection?
    let status: @convention(c) (Connection?) -> ConnStatusType
    let finish: @convention(c) (Connection?) -> Void
    let setnonblocking: @convention(c) (Connection?, Int32) -> Int32
    let setNoticeProcessor: @convention(c) (Connection?, PQnoticeProcessor?, UnsafeMutableRawPointer?) -> PQnoticeProcessor?
    let socket: @convention(c) (Connection?) -> Int32
    let execParams: @convention(c) (
        Connection?, UnsafePointer<CChar>?, Int32, UnsafePointer<Oid>?, UnsafePointer<UnsafePointer<CChar>?>?,
        UnsafePointer<Int32>?, UnsafePointer<Int32>?, Int32
    ) -> Result?
    let execPrepared: @convention(c) (
        Connection?, UnsafePointer<CChar>?, Int32, UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?, UnsafePointer<Int32>?, Int32
    ) -> Result?
    let prepare: @convention(c) (Connection?, UnsafePointer<CChar>?, UnsafePointer<CChar>?, Int32, UnsafePointer<Oid>?) -> Result?
    let resultStatus: @convention(c) (Result?) -> ExecStatusType
    let resultErrorField: @convention(c) (Result?, Int32) -> UnsafeMutablePointer<CChar>?
    let resultErrorMessage: @convention(c) (Result?) -> UnsafeMutablePointer<CChar>?
    let clear: @convention(c) (Result?) -> Void
    let errorMessage: @convention(c) (Connection?) -> UnsafeMutablePointer<CChar>?
    let consumeInput: @convention(c) (Connection?) -> Int32
    let notifies: @convention(c) (Connection?) -> UnsafeMutablePointer<PGnotify>?
    let freemem: @convention(c) (UnsafeMutableRawPointer?) -> Void
    let ntuples: @convention(c) (Result?) -> Int32
    let nfields: @convention(c) (Result?) -> Int32
    let fname: @convention(c) (Result?, Int32) -> UnsafeMutablePointer<CChar>?
    let getisnull: @convention(c) (Result?, Int32, Int32) -> Int32
    let getlength: @convention(c) (Result?, Int32, Int32) -> Int32
    let getvalue: @convention(c) (Result?, Int32, Int32) -> UnsafeMutablePointer<CChar>?

    /// The library, or why it cannot be loaded.
    package static let shared: Swift.Result<LibPQ, PGError> = load()

    /// The library, loading it on first use.
    static func get() throws(PGError) -> LibPQ { try shared.get() }

    private static func load() -> Swift.Result<LibPQ, PGError> {
        let name = "libpq.so.5"
        // Never closed, like every library this process loads.
        guard let handle = dlopen(name, RTLD_NOW | RTLD_LOCAL) else {
            let reason = dlerror().map { String(cString: $0) } ?? "not found"
            return .failure(PGError(.connectionFailed, "cannot load \(name) for the shared bus (\(reason)); install libpq5"))
        }
        func symbol<T>(_ symbolName: String, as type: T.Type) throws(PGError) -> T {
            guard let address = dlsym(handle, symbolName) else {
                throw PGError(.connectionFailed, "\(name) has no \(symbolName); install libpq5 12 or later")
            }
            return unsafeBitCast(address, to: type)
        }
        do {
            return .success(LibPQ(
                connectdb: try symbol("PQconnectdb", as: (@convention(c) (UnsafePointer<CChar>?) -> Connection?).self),
                connectdbParams: try symbol(
                    "PQconnectdbParams",
                    as: (@convention(c) (UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<UnsafePointer<CChar>?>?, Int32) -> Connection?).self
                ),
                status: try symbol("PQstatus", as: (@convention(c) (Connection?) -> ConnStatusType).self),
                finish: try symbol("PQfinish", as: (@convention(c) (Connection?) -> Void).self),
                setnonblocking: try symbol("PQsetnonblocking", as: (@convention(c) (Connection?, Int32) -> Int32).self),
                setNoticeProcessor: try symbol(
                    "PQsetNoticeProcessor",
                    as: (@convention(c) (Connection?, PQnoticeProcessor?, UnsafeMutableRawPointer?) -> PQnoticeProcessor?).self
                ),
                socket: try symbol("PQsocket", as: (@convention(c) (Connection?) -> Int32).self),
                execParams: try symbol("PQexecParams", as: (@convention(c) (
                    Connection?, UnsafePointer<CChar>?, Int32, UnsafePointer<Oid>?, UnsafePointer<UnsafePointer<CChar>?>?,
                    UnsafePointer<Int32>?, UnsafePointer<Int32>?, Int32
                ) -> Result?).self),
                execPrepared: try symbol("PQexecPrepared", as: (@convention(c) (
                    Connection?, UnsafePointer<CChar>?, Int32, UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?,
                    UnsafePointer<Int32>?, Int32
                ) -> Result?).self),
                prepare: try symbol(
                    "PQprepare",
                    as: (@convention(c) (Connection?, UnsafePointer<CChar>?, UnsafePointer<CChar>?, Int32, UnsafePointer<Oid>?) -> Result?).self
                ),
                resultStatus: try symbol("PQresultStatus", as: (@convention(c) (Result?) -> ExecStatusType).self),
                resultErrorField: try symbol("PQresultErrorField", as: (@convention(c) (Result?, Int32) -> UnsafeMutablePointer<CChar>?).self),
                resultErrorMessage: try symbol("PQresultErrorMessage", as: (@convention(c) (Result?) -> UnsafeMutablePointer<CChar>?).self),
                clear: try symbol("PQclear", as: (@convention(c) (Result?) -> Void).self),
                errorMessage: try symbol("PQerrorMessage", as: (@convention(c) (Connection?) -> UnsafeMutablePointer<CChar>?).self),
                consumeInput: try symbol("PQconsumeInput", as: (@convention(c) (Connection?) -> Int32).self),
                notifies: try symbol("PQnotifies", as: (@convention(c) (Connection?) -> UnsafeMutablePointer<PGnotify>?).self),
                freemem: try symbol("PQfreemem", as: (@convention(c) (UnsafeMutableRawPointer?) -> Void).self),
                ntuples: try symbol("PQntuples", as: (@convention(c) (Result?) -> Int32).self),
                nfields: try symbol("PQnfields", as: (@convention(c) (Result?) -> Int32).self),
                fname: try symbol("PQfname", as: (@convention(c) (Result?, Int32) -> UnsafeMutablePointer<CChar>?).self),
                getisnull: try symbol("PQgetisnull", as: (@convention(c) (Result?, Int32, Int32) -> Int32).self),
                getlength: try symbol("PQgetlength", as: (@convention(c) (Result?, Int32, Int32) -> Int32).self),
                getvalue: try symbol("PQgetvalue", as: (@convention(c) (Result?, Int32, Int32) -> UnsafeMutablePointer<CChar>?).self)
            ))
        } catch {
            return .failure(error)
        }
    }
}
