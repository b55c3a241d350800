import CommandBus
import CommandBusSupport
import Testing

/// How messages say a duration: whole seconds counted, whole milliseconds under a second as
/// milliseconds, anything else as `Duration` describes itself; the core's copy says the same.
struct DurationSpokenTests {
    @Test(arguments: [
        (Duration.seconds(1), "1 second"), (.seconds(10), "10 seconds"), (.zero, "0 seconds"),
        (.milliseconds(1), "1 ms"), (.milliseconds(50), "50 ms"), (.milliseconds(999), "999 ms"),
        (.milliseconds(1_500), "1.5 seconds"), (.microseconds(1), "1e-06 seconds"),
    ])
    func aDurationIsSaidAsAPersonReadsIt(duration: Duration, said: String) {
        #expect(duration.spoken == said)
        #expect(CommandBusError.timedOut("x", after: duration).message == "command 'x' timed out after \(said)")
    }
}
