import CommandBus
import CommandBusHost
import CommandBusSupport
@testable import CommandBusServer
import Foundation
import Testing

/// The server's most frequent lines are written straight into bytes; they must stay byte for byte
/// what the general path (a `JSONValue` and its text) writes, and a command's log line what its
/// `String` formula wrote.
struct ReplyLineTests {
    private func general(_ value: JSONValue) -> [UInt8] { Array(value.text.utf8) + [0x0A] }

    @Test func acknowledgementsAndResultsAreWhatTheGeneralPathWrites() {
        var generator = SystemRandomNumberGenerator()
        let ids: [JSONValue?] = [nil, .null, .integer(1), .integer(.min), .string("a\"b\n/é"), .number(0.5), .object(["k": .array([])])]
            + (0..<200).map { _ in randomJSONValue(using: &generator) }
        for id in ids {
            let command = CommandID.make()
            #expect(ReplyLine.accepted(id, commandID: command) == general(CommandServer.success(id, ["commandId": .string(CommandID.text(command))])))
            let result = randomJSONValue(using: &generator)
            #expect(
                ReplyLine.succeeded(id, commandID: command, result: result)
                    == general(CommandServer.success(id, ["commandId": .string(CommandID.text(command)), "result": result]))
            )
        }
    }

    @Test func aCommandsLogLineIsWhatItsStringFormulaWrote() {
        let durations: [Duration] = [
            .zero, .nanoseconds(1), .microseconds(49), .microseconds(50), .microseconds(951), .milliseconds(12),
            .microseconds(1_234_567), .seconds(3 * 86_400), .seconds(Int64.max / 2),
        ]
        let trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        let envelopes = [
            CommandEnvelope(commandName: "greet"),
            CommandEnvelope(commandName: "odd\nname é", metadata: [TraceContext.key: trace]),
            CommandEnvelope(commandName: "bad-trace", metadata: [TraceContext.key: "nope"]),
        ]
        let errors: [CommandBusError?] = [nil, .noHandler("x"), .timedOut("slow\tone", after: .seconds(1))]
        for envelope in envelopes {
            for duration in durations {
                for error in errors {
                    var line: [UInt8] = []
                    CommandLogObserver.compose(envelope, state: error == nil ? .succeeded : .failed, error: error, after: duration, into: &line)
                    let expected = formula(envelope, state: error == nil ? .succeeded : .failed, error: error, after: duration)
                    #expect(String(decoding: line, as: UTF8.self) == expected)
                }
            }
        }
    }

    /// How the line was written before it was written into bytes.
    private func formula(_ envelope: CommandEnvelope, state: CommandState, error: CommandBusError?, after duration: Duration) -> String {
        let milliseconds = (duration.seconds * 10_000).rounded() / 10
        var line = "\(quotedLine(envelope.commandName)) \(CommandID.text(envelope.id)) \(state.rawValue) in \(milliseconds) ms"
        if let error { line += ": \(quotedLine(error.message))" }
        if let trace = TraceContext.traceID(in: envelope.metadata) { line += " trace=\(trace)" }
        return line
    }
}
