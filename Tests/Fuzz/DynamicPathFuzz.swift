// libFuzzer target: arbitrary bytes as a command name and JSON payload on the bus's dynamic path.
// Built with the CommandBus sources by scripts/fuzz.sh; it must never crash, only refuse.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

struct FuzzOrder: Command {
    typealias Result = FuzzOrder
    static let name = "order"
    var id: Int
    var items: [FuzzItem]
    var note: String?
    var tags: [String: Double]?
}

struct FuzzItem: Codable, Sendable {
    var sku: String
    var quantity: UInt8
    var price: Decimal?
}

struct FuzzOrderHandler: CommandHandler {
    func canHandle(_ command: FuzzOrder) -> Bool { command.items.count < 1_000 }
    func handle(_ command: FuzzOrder, context: CommandContext) async throws -> FuzzOrder { command }
}

let fuzzBus: CommandBus = {
    let bus = CommandBus(configuration: .init(maxPayloadBytes: 1 << 16))
    bus.register(FuzzOrderHandler())
    return bus
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDynamicPath(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = Data(UnsafeRawBufferPointer(start: start, count: count))
    // The first byte picks the name: the real command, or junk that has no handler.
    let name = bytes.first.map { $0 & 1 == 0 ? FuzzOrder.name : String(decoding: bytes.prefix(8), as: UTF8.self) } ?? ""
    let payload = bytes.dropFirst()
    do {
        _ = try fuzzBus.canHandle(name: name, payload: Data(payload))
    } catch {
        // Every refusal must be a one-line message naming the command.
        precondition(!error.message.contains("\n") && error.message.contains("'"), "bad error: \(error.message)")
    }
    if let order = try? JSONWire.decoder.decode(FuzzOrder.self, from: Data(payload)) {
        let output = CommandOutput(order)
        _ = try? output.jsonData(commandName: FuzzOrder.name)
    }
    return 0
}
