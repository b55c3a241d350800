import CommandBusSupport
import Testing

/// `CMDBUS_SPIN_US`: how long threads that expect data soon spin before they sleep.
struct SpinBudgetTests {
    @Test(arguments: [
        ("0", Duration.zero), ("25", .microseconds(25)), ("10000", .microseconds(10_000)),
        ("", .microseconds(50)), ("-1", .microseconds(50)), ("10001", .microseconds(50)), ("fast", .microseconds(50)),
    ])
    func theVariableSetsTheSpinWithinBoundsOrTheDefaultHolds(text: String, expected: Duration) {
        #expect(SpinBudget.duration(from: text, default: .microseconds(50)) == expected)
    }

    @Test func withoutTheVariableTheDefaultHolds() {
        #expect(SpinBudget.duration(from: nil, default: .microseconds(100)) == .microseconds(100))
    }

    /// With spinning off, isolated calls and a subcommand that crosses workers still work: the
    /// waits end in the same blocking reads.
    @Test(.timeLimit(.minutes(2)))
    func isolationWorksWithSpinningOff() async throws {
        let directory = try examplePluginDirectory()
        defer { directory.remove() }
        let result = try await cmdbus(
            ["run", "greet-all", #"{"names":["Ada","Lin"]}"#, "--isolate", "--no-journal", "--plugins", directory.path],
            environment: [SpinBudget.variable: "0"]
        )
        #expect(result.status == 0 && result.stdout == #"{"greetings":["Hello, Ada!","Hello, Lin!"]}"# + "\n", "\(result.stderr)")
    }
}
