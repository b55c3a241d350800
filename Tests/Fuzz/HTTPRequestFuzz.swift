// libFuzzer target: arbitrary bytes through the dashboard's HTTP request parser, the first
// thing a TCP client reaches. Built with the CommandBusHTTP parser's sources by scripts/fuzz.sh.

let fuzzParser = HTTPRequestParser(limits: HTTPLimits())

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTPRequest(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = Array(UnsafeRawBufferPointer(start: start, count: count))
    switch fuzzParser.parse(bytes) {
    case .needMore:
        break
    case .refused(let status, let reason):
        precondition((400..<600).contains(status), "refused with status \(status)")
        precondition(!reason.isEmpty && !reason.contains("\n"), "a refusal's reason is not one line: \(reason)")
    case .request(let request, let consumed):
        precondition(consumed > 0 && consumed <= bytes.count, "consumed \(consumed) of \(bytes.count) bytes")
        precondition(["GET", "HEAD", "POST"].contains(request.method), "method \(request.method)")
        precondition(request.path.hasPrefix("/"), "path \(request.path) does not start with /")
        let segments = request.path.split(separator: "/", omittingEmptySubsequences: false)
        precondition(!segments.contains(".") && !segments.contains(".."), "path \(request.path) climbs")
        // The request is all in what it consumed: the same bytes alone read the same, and
        // bytes after them (the next pipelined request) change nothing.
        guard case .request(let alone, let aloneConsumed) = fuzzParser.parse(Array(bytes[..<consumed])) else {
            preconditionFailure("the request's own bytes do not read as a request")
        }
        precondition(aloneConsumed == consumed && alone.path == request.path && alone.body == request.body)
        guard case .request(_, let followedConsumed) = fuzzParser.parse(Array(bytes[..<consumed]) + Array("GET / HTTP/1.1\r\n\r\n".utf8)) else {
            preconditionFailure("a request followed by another does not read as a request")
        }
        precondition(followedConsumed == consumed)
    }
    return 0
}
