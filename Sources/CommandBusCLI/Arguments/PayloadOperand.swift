import CommandBusHost
import CommandBusSupport
import Glibc

/// Where `run` and `can` take a payload from: the operand itself, JSON text; standard input,
/// for `-` or `@-`; or a file, for `@PATH` (curl's spelling; no JSON text starts with `@`),
/// which may be a pipe, as `@<(jq …)` gives. An argument can hold 128 KiB at most (the
/// kernel's limit for one), a file or input as much as `--max-payload` allows.
enum PayloadOperand: Equatable {
    /// JSON text on the command line.
    case argument(String)
    /// Standard input, to its end.
    case standardInput
    /// A file, to its end.
    case file(String)

    /// What `operand` names; `nil` for none.
    init?(_ operand: String?) {
        guard let operand else { return nil }
        switch operand {
        case "-", "@-": self = .standardInput
        case _ where operand.hasPrefix("@"): self = .file(String(operand.dropFirst()))
        default: self = .argument(operand)
        }
    }

    /// The payload's text: the argument, or what the input or file holds, at most `maxBytes`.
    func text(command: String, maxBytes: Int) throws(HostFailure) -> String {
        let bytes: [UInt8]
        switch self {
        case .argument(let text): return text
        case .standardInput:
            bytes = try Self.read(STDIN_FILENO, maxBytes: maxBytes, command: command, source: self)
        case .file(let path):
            let descriptor = open(path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else {
                throw HostFailure(.noInput, "cannot read the payload file \(quoted(path)) (\(String(cString: strerror(errno)))); give @PATH of a JSON file, or - to read standard input", command: command)
            }
            defer { close(descriptor) }
            bytes = try Self.read(descriptor, maxBytes: maxBytes, command: command, source: self)
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw HostFailure(.decodingFailed, "payload for \(quoted(command)) \(source) is not UTF-8 text, as JSON must be; save it as UTF-8", command: command)
        }
        return text
    }

    /// Where the payload is, for a message: `on standard input`, `in file 'p.json'`, or nothing for an argument.
    var source: String {
        switch self {
        case .argument: ""
        case .standardInput: "on standard input"
        case .file(let path): "in file \(quoted(path))"
        }
    }

    /// Reads `descriptor` to its end; refuses more than `maxBytes`.
    private static func read(_ descriptor: Int32, maxBytes: Int, command: String, source: PayloadOperand) throws(HostFailure) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else {
                throw HostFailure(.noInput, "cannot read the payload \(source.source) (\(String(cString: strerror(errno)))); give @PATH of a JSON file, or - to read standard input", command: command)
            }
            if count == 0 { return bytes }
            bytes += chunk[..<count]
            guard bytes.count <= maxBytes else {
                throw HostFailure(.payloadTooLarge, "payload for \(quoted(command)) \(source.source) is more than the \(maxBytes)-byte limit; raise --max-payload if the handlers take it", command: command)
            }
        }
    }
}
