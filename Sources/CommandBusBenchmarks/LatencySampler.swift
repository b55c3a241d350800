/// Collects per-operation latencies and reports percentiles in nanoseconds.
struct LatencySampler {
    private(set) var samples: [Int64] = []

    init(capacity: Int) {
        samples.reserveCapacity(capacity)
    }

    /// Times one call of `operation`.
    mutating func measure(_ operation: () async throws -> Void) async rethrows {
        let start = ContinuousClock.now
        try await operation()
        record(ContinuousClock.now - start)
    }

    /// Adds one latency measured elsewhere.
    mutating func record(_ elapsed: Duration) {
        samples.append(elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000)
    }

    /// The `p`th percentile (0...100) of the samples, in nanoseconds.
    func percentile(_ p: Double) -> Double {
        guard !samples.isEmpty else { return 0 }
        let sorted = samples.sorted()
        let index = min(sorted.count - 1, Int((Double(sorted.count - 1) * p / 100).rounded()))
        return Double(sorted[index])
    }
}

/// Seconds as a `Double`.
func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

/// The median of some values.
func median(_ values: [Double]) -> Double {
    guard !values.isEmpty else { return 0 }
    let sorted = values.sorted()
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}
