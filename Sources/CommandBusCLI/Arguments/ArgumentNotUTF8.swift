import CommandBus
import CommandBusHost
import Glibc

/// An argument `cmdbus` was started with that is not UTF-8 text. Swift's `CommandLine.arguments`
/// repairs such bytes (each becomes U+FFFD), so a payload given that way would run changed, with
/// nobody told: `cmdbus` refuses it instead, naming the argument and its first byte that is not.
public struct ArgumentNotUTF8: Sendable, Equatable {
    /// Which argument, counting from 1 after the program name.
    public let index: Int
    /// Where in it the first byte that is not UTF-8 is, from 0.
    public let byteOffset: Int
    /// That byte.
    public let byte: UInt8

    /// The first of this process's arguments (after the program name) that is not UTF-8, if any.
    public static func inProcess() -> ArgumentNotUTF8? {
        let count = Int(CommandLine.argc)
        guard count > 1 else { return nil }
        return first(in: (1..<count).map { index in
            guard let argument = CommandLine.unsafeArgv[index] else { return [] }
            return UnsafeBufferPointer(start: argument, count: strlen(argument)).map { UInt8(bitPattern: $0) }
        })
    }

    /// The first of `arguments` (each its bytes, after the program name) that is not UTF-8, if any.
    static func first(in arguments: [[UInt8]]) -> ArgumentNotUTF8? {
        for (index, bytes) in arguments.enumerated() {
            if let offset = Unicode.UTF8.firstInvalidOffset(in: bytes) { return ArgumentNotUTF8(index: index + 1, byteOffset: offset, byte: bytes[offset]) }
        }
        return nil
    }

    /// The usage failure `cmdbus` reports for it.
    var failure: HostFailure {
        .usage("argument \(index) is not UTF-8 text (byte 0x\(String(byte, radix: 16, uppercase: true)) at byte \(byteOffset + 1) of it), which cmdbus would have to change; give it as UTF-8 (iconv -t UTF-8 converts a file) and run again")
    }
}
