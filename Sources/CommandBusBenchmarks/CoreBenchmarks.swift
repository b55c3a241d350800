import CommandBus
import Foundation

/// The trivial command every latency figure uses.
struct Ping: Command {
    typealias Result = Int
    static let name = "ping"
    var value: Int
}

/// The work both the bus's handler and the no-bus baseline do.
@inline(never)
func trivialWork(_ command: Ping) async -> Int { command.value &+ 1 }

struct PingHandler: CommandHandler {
    func handle(_ command: Ping, context: CommandContext) async throws -> Int { await trivialWork(command) }
}

/// A handler for one of many filler command names, to grow the route table.
struct FillerHandler: DynamicCommandHandler {
    let commandName: String
    func handle(payload: Data, context: CommandContext) async throws -> Data { payload }
}

/// The in-process bus figures of issue #2.
enum CoreBenchmarks {
    static let rounds = 5
    static let sendsPerRound = 20_000

    static func run(into report: inout BenchmarkReport) async throws {
        let bus = CommandBus()
        bus.register(PingHandler())

        // Warm up both paths, then alternate rounds so that machine noise hits both alike.
        _ = try await sendLatencies(bus, count: 2_000)
        _ = await baselineLatencies(count: 2_000)
        var sendP50: [Double] = [], sendP99: [Double] = [], baseP50: [Double] = []
        for _ in 0..<rounds {
            let send = try await sendLatencies(bus, count: sendsPerRound)
            let base = await baselineLatencies(count: sendsPerRound)
            sendP50.append(send.percentile(50))
            sendP99.append(send.percentile(99))
            baseP50.append(base.percentile(50))
        }
        report.record("send_p50_ns", median(sendP50))
        report.record("send_p99_ns", median(sendP99))
        report.record("baseline_p50_ns", median(baseP50))
        report.record("send_vs_baseline_ratio", median(sendP50) / median(baseP50))
        report.record("post_throughput_per_s", try await postThroughput(bus, count: 1_000_000))
        report.record("dynamic_send_p50_ns", try await dynamicLatencies(bus, count: sendsPerRound).percentile(50))
        report.record("route_10000_vs_10_ratio", try await routeRatio())
    }

    static func sendLatencies(_ bus: CommandBus, count: Int) async throws -> LatencySampler {
        var sampler = LatencySampler(capacity: count)
        for i in 0..<count {
            try await sampler.measure { _ = try await bus.send(Ping(value: i)) }
        }
        return sampler
    }

    static func baselineLatencies(count: Int) async -> LatencySampler {
        var sampler = LatencySampler(capacity: count)
        for i in 0..<count {
            await sampler.measure { _ = await Task { await trivialWork(Ping(value: i)) }.value }
        }
        return sampler
    }

    static func dynamicLatencies(_ bus: CommandBus, count: Int) async throws -> LatencySampler {
        let payload = Data(#"{"value":1}"#.utf8)
        var sampler = LatencySampler(capacity: count)
        for _ in 0..<count {
            try await sampler.measure { _ = try await bus.send(name: Ping.name, payload: payload) }
        }
        return sampler
    }

    static func postThroughput(_ bus: CommandBus, count: Int) async throws -> Double {
        let start = ContinuousClock.now
        var tickets: [CommandTicket<Int>] = []
        tickets.reserveCapacity(count)
        for i in 0..<count { tickets.append(bus.post(Ping(value: i))) }
        for ticket in tickets { _ = try await ticket.result }
        return Double(count) / seconds(ContinuousClock.now - start)
    }

    /// Send latency with 10,000 registered names over that with 10, in alternating rounds.
    static func routeRatio() async throws -> Double {
        func bus(withNames count: Int) -> CommandBus {
            let bus = CommandBus()
            bus.register(PingHandler())
            for i in 0..<(count - 1) { bus.register(FillerHandler(commandName: "filler-\(i)")) }
            return bus
        }
        let small = bus(withNames: 10), large = bus(withNames: 10_000)
        _ = try await sendLatencies(small, count: 2_000)
        _ = try await sendLatencies(large, count: 2_000)
        var smallP50: [Double] = [], largeP50: [Double] = []
        for _ in 0..<rounds {
            smallP50.append(try await sendLatencies(small, count: sendsPerRound).percentile(50))
            largeP50.append(try await sendLatencies(large, count: sendsPerRound).percentile(50))
        }
        return median(largeP50) / median(smallP50)
    }
}
