@testable import CommandBusCLI
import Testing

/// The typed values of options, read from a parsed command line.
@Suite struct ArgumentValuesTests {
    static let spec = ArgumentSpec(command: "serve", options: [
        .init(name: "drain", short: nil, value: "SECONDS", help: ""),
        .init(name: "delay", short: nil, value: "DURATION", help: ""),
    ])

    /// A positive duration under a millisecond is a millisecond, where it was none: `--drain
    /// 0.0001` drained for no time at all and `--timeout 0.0001` timed a command out before it
    /// ran, though each was accepted as positive.
    @Test(arguments: [("0.0001", 1), ("0.0009", 1), ("0.001", 1), ("0.5", 500), ("500ms", 500), ("2m", 120_000)])
    func aPositiveDurationIsNeverNone(text: String, milliseconds: Int64) throws {
        let parsed = try Self.spec.parse(["--drain", text])
        #expect(try parsed.seconds("drain") == .milliseconds(milliseconds))
    }

    /// A duration that may be none (`--delay 0`) stays none.
    @Test func aDurationMayBeNone() throws {
        #expect(try Self.spec.parse(["--delay", "0"]).duration("delay") == .zero)
    }
}
