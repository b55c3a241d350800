// libFuzzer target: arbitrary command lines through the CLI's argument parser and payload
// builder. Built with those CommandBusCLI sources by scripts/fuzz.sh.
import CommandBus
import CommandBusHost
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

let fuzzSpec = ArgumentSpec(command: "run", options: [
    .init(name: "param", short: "p", value: "KEY=VALUE", help: ""),
    .init(name: "timeout", short: "t", value: "SECONDS", help: ""),
    .init(name: "json", short: nil, help: ""),
])

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzArguments(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: start, count: count)
    // NUL bytes separate the arguments, as they do in argv.
    let arguments = bytes.split(separator: 0, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
    do {
        let parsed = try fuzzSpec.parse(arguments)
        // Only JSON text: `-` and `@PATH` would read the fuzzer's standard input and files.
        let operand = parsed.positionals.first.flatMap { PayloadOperand($0) == .argument($0) ? $0 : nil }
        _ = try PayloadBuilder.build(command: "fuzz", operand: operand, pairs: parsed.all("param"), maxBytes: 1 << 20)
    } catch {
        precondition(!error.message.contains("\n"), "a usage error spans lines: \(error.message)")
        precondition([.usage, .malformedPayload].contains(error.exitCode), "unexpected exit code \(error.exitCode)")
    }
    // The typed values: any text is a value or a one-line usage error, never a trap (seconds
    // whose milliseconds overflowed Int64 once stopped cmdbus).
    if let parsed = try? fuzzSpec.parse(arguments) {
        func check(_ read: () throws(HostFailure) -> Void) {
            do { try read() } catch { precondition(error.exitCode == .usage && !error.message.contains("\n"), "\(error.message)") }
        }
        check { () throws(HostFailure) in _ = try parsed.seconds("timeout") }
        check { () throws(HostFailure) in _ = try parsed.duration("timeout") }
        check { () throws(HostFailure) in _ = try parsed.positiveInteger("timeout") }
    }
    if let text = arguments.first, let value = JSONValue.parse(text) { _ = value.text }
    return 0
}
