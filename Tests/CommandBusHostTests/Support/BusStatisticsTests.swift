import CommandBus
import CommandBusHost
import Testing

/// The `status` figures as a client reads them.
struct BusStatisticsTests {
    /// Latencies and uptime are given to the microsecond and the millisecond: a clock's reading
    /// divided into milliseconds came out as `1.5108840000000001`, noise a reader had to ignore.
    @Test func figuresStopAtTheirLastMeaningfulDigit() throws {
        let statistics = BusStatistics()
        for _ in 0..<20 {
            let envelope = CommandEnvelope(commandName: "greet")
            statistics.commandAccepted(envelope)
            // Some work between, so each latency is a clock's reading, not zero.
            var spin = 0
            for step in 0..<(1 + Int.random(in: 0..<20_000)) { spin &+= step }
            #expect(spin >= 0)
            statistics.commandFinished(envelope, state: .succeeded, error: nil)
        }
        let summary = try #require(statistics.summary(uptime: .nanoseconds(1_234_567_891), plugins: 1).objectValue)
        #expect(summary["uptimeSeconds"] == .number(1.235))
        let greet = try #require(summary["commands"]?.objectValue?["greet"]?.objectValue)
        for key in ["p50Ms", "p99Ms"] {
            let text = try #require(greet[key]).text
            let decimals = text.split(separator: ".").dropFirst().first?.count ?? 0
            #expect(decimals <= 3, "\(key) is \(text)")
        }
    }
}
