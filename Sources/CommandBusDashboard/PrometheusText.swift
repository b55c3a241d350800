import CommandBusSupport

/// Writes metrics in the Prometheus text exposition format (version 0.0.4).
///
/// Each family is written whole, `# HELP` and `# TYPE` first; label values are escaped as the
/// format asks (backslash, double quote, newline).
package struct PrometheusText {
    private(set) package var text = ""

    /// An empty exposition.
    package init() {}

    /// The content type a scrape is served with.
    package static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    /// Starts a family.
    package mutating func family(_ name: String, type: String, help: String) {
        text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
    }

    /// One sample of the current family.
    package mutating func sample(_ name: String, _ labels: [(String, String)] = [], _ value: Double) {
        text += name
        if !labels.isEmpty {
            text += "{" + labels.map { "\($0.0)=\"\(Self.escaped($0.1))\"" }.joined(separator: ",") + "}"
        }
        text += " " + Self.format(value) + "\n"
    }

    /// One histogram's buckets (cumulative), sum and count.
    package mutating func histogram(_ name: String, _ labels: [(String, String)], _ histogram: CommandMetrics.Histogram) {
        var cumulative = 0
        for (index, bound) in CommandMetrics.bucketBounds.enumerated() {
            cumulative += histogram.counts[index]
            sample(name + "_bucket", labels + [("le", Self.format(bound))], Double(cumulative))
        }
        sample(name + "_bucket", labels + [("le", "+Inf")], Double(histogram.count))
        sample(name + "_sum", labels, histogram.sum)
        sample(name + "_count", labels, Double(histogram.count))
    }

    static func escaped(_ value: String) -> String {
        escaping(value, ["\\": "\\\\", "\"": "\\\"", "\n": "\\n"])
    }

    static func format(_ value: Double) -> String {
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return "\(value)"
    }
}
