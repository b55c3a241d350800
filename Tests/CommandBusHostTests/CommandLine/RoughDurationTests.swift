@testable import CommandBusCLI
import Testing

/// How `cmdbus bus` says a wait or a delay: to a tenth, in the largest unit under its size,
/// and a whole number without its ".0".
@Suite struct RoughDurationTests {
    @Test(arguments: [
        (29.97, "30 s"), (0.04, "0 s"), (1.25, "1.3 s"), (59.4, "59.4 s"), (-4.0, "-4 s"),
        (90, "1 min"), (3_599, "59 min"), (3_600, "1 h"), (3_599.9, "59 min"), (6_840, "1.9 h"), (31_680, "8.8 h"),
        (86_400, "1 d"), (129_600, "1.5 d"),
    ])
    func aWaitIsSaidAsAPersonReadsIt(seconds: Double, said: String) {
        #expect(BusCommand.roughly(seconds) == said)
    }

    /// A figure too large for an `Int` (a bus row written by hand) is said, not trapped on.
    @Test func aWaitBeyondAnyIntegerIsStillSaid() {
        #expect(BusCommand.roughly(1e300).hasSuffix("e+295 d"))
    }
}
