import Foundation

/// The figures of one benchmark run, in the order they were measured.
struct BenchmarkReport {
    private(set) var figures: [(key: String, value: Double)] = []

    mutating func record(_ key: String, _ value: Double) {
        figures.append((key, value))
        FileHandle.standardError.write(Data("  measured \(key)\n".utf8))
    }

    /// The figure recorded under `key` (NaN if none is).
    func value(_ key: String) -> Double {
        figures.last { $0.key == key }?.value ?? .nan
    }

    /// One JSON object with every figure.
    var json: String {
        let body = figures.map { "  \"\($0.key)\": \(Self.format($0.value))" }.joined(separator: ",\n")
        return "{\n\(body)\n}"
    }

    /// One aligned line per figure.
    var text: String {
        let width = figures.map(\.key.count).max() ?? 0
        return figures.map { $0.key.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + Self.format($0.value) }
            .joined(separator: "\n")
    }

    private static func format(_ value: Double) -> String {
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(format: "%.3f", value)
    }
}
