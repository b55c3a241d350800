import CommandBus
import CommandBusDashboard
import CommandBusHost
import Foundation
import Testing

/// Names come from clients: a flood of invented ones is counted under two names, not one each,
/// in `status` and in `/metrics` (3,000 unknown names made a 4 MB scrape and 3,000 latency rings).
struct CountedNameTests {
    static let noHandler = CommandBusError.noHandler("x")

    @Test func statusCountsNamesNoHandlerTookTogetherAndCapsTheRest() throws {
        let statistics = BusStatistics()
        for index in 0..<1_500 {
            for (name, error) in [("made.up.\(index)", Self.noHandler), ("real.\(index)", nil)] {
                let envelope = CommandEnvelope(commandName: name)
                statistics.commandAccepted(envelope)
                statistics.commandFinished(envelope, state: error == nil ? .succeeded : .failed, error: error)
            }
        }
        let commands = try #require(statistics.summary(uptime: .seconds(1), plugins: 1).objectValue?["commands"]?.objectValue)
        #expect(commands.count == CountedName.limit + 1)
        #expect(commands[CountedName.noHandler]?.objectValue?["count"] == .integer(1_500))
        #expect(commands[CountedName.other]?.objectValue?["count"] == .integer(Int64(1_500 - (CountedName.limit - 1))))
        #expect(commands["real.0"]?.objectValue?["count"] == .integer(1))
    }

    @Test func metricsCountNamesNoHandlerTookTogetherAndCapTheRest() {
        let metrics = CommandMetrics()
        for index in 0..<1_500 {
            for (name, error) in [("made.up.\(index)", Self.noHandler), ("real.\(index)", nil)] {
                let envelope = CommandEnvelope(commandName: name)
                metrics.commandAccepted(envelope)
                metrics.commandFinished(envelope, state: error == nil ? .succeeded : .failed, error: error, after: .milliseconds(1))
            }
        }
        let names = Dictionary(uniqueKeysWithValues: metrics.names.map { ($0.name, $0.counts) })
        #expect(names.count == CountedName.limit + 1)
        #expect(names[CountedName.noHandler]?.outcomes[.failed] == 1_500)
        #expect(names[CountedName.other]?.histogram.count == 1_500 - (CountedName.limit - 1))
    }
}
