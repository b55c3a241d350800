// libFuzzer target: arbitrary bytes as one line of the server's NDJSON protocol, through the
// request reader every connection's lines go through. Built with ServerRequest.swift by scripts/fuzz.sh.
import CommandBus

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzServerRequest(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let line = Array(UnsafeRawBufferPointer(start: start, count: count))
    do {
        let request = try ServerRequest(line: line)
        // A request the reader took is a JSON object with a string op.
        precondition(JSONValue.members(ofObject: line) != nil, "a line that is not an object was read as a request")
        precondition(request.payload.map { JSONValue.parse($0.text) != nil } ?? true, "a payload does not survive its own text")
    } catch {
        // The refusal goes back to the client as one line of JSON.
        precondition(!error.message.isEmpty && !error.message.contains("\n"), "a refusal is not one line: \(error.message)")
        precondition(error.id.map { JSONValue.parse($0.text) != nil } ?? true, "a refused request's id does not survive its own text")
    }
    return 0
}
