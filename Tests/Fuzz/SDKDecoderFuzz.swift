// libFuzzer target: arbitrary payloads through the plugin SDK's decoder, as can_handle() and
// invert() receive them from a host, and its compact decoder held to JSONDecoder's answers.
// Built with the CommandBusPlugin sources by scripts/fuzz.sh.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

struct FuzzAdd: ReversiblePluginCommand, Equatable {
    typealias Result = FuzzAdd
    static let name = "fuzz.add"
    var counter: String
    var by: Int
    var nested: [String: [Int?]]?
    func inverse() -> FuzzAdd { FuzzAdd(counter: counter, by: by == .min ? 0 : -by, nested: nested) }
}

struct FuzzAddHandler: PluginHandler {
    func canHandle(_ command: FuzzAdd) -> Bool { !command.counter.isEmpty }
    func handle(_ command: FuzzAdd, context: PluginContext) async throws -> FuzzAdd { command }
}

let fuzzBox = PluginHandlerBox(FuzzAddHandler())

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSDKDecoder(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let payload = Data(UnsafeRawBufferPointer(start: start, count: count))
    // Where the SDK's compact decoder answers, Foundation's must give the same command.
    if let fast = CompactJSONDecoding.decode(FuzzAdd.self, from: payload) {
        precondition((try? JSONDecoder().decode(FuzzAdd.self, from: payload)) == fast, "the compact decoder and JSONDecoder disagree")
    }
    do {
        _ = try fuzzBox.canHandle(payload)
        _ = try fuzzBox.invert(payload)
    } catch {
        precondition(!error.message.isEmpty && !error.message.contains("\n"), "bad error: \(error.message)")
    }
    return 0
}
