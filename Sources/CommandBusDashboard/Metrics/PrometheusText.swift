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
        if !labels.isEmpty { text += "{" + Self.labelList(labels) + "}" }
        text += " " + Self.format(value) + "\n"
    }

    /// One histogram's buckets (cumulative), sum and count. Its labels are escaped once, not once per bucket.
    package mutating func histogram(_ name: String, _ labels: [(String, String)], _ histogram: CommandMetrics.Histogram) {
        let written = Self.labelList(labels)
        let bucket = name + "_bucket{" + (written.isEmpty ? "" : written + ",") + "le=\""
        var cumulative = 0
        for (index, bound) in Self.bucketLabels.enumerated() {
            cumulative += histogram.counts[index]
            text += bucket + bound + "\"} " + Self.format(Double(cumulative)) + "\n"
        }
        text += bucket + "+Inf\"} " + Self.format(Double(histogram.count)) + "\n"
        let braced = written.isEmpty ? "" : "{" + written + "}"
        text += name + "_sum" + braced + " " + Self.format(histogram.sum) + "\n"
        text += name + "_count" + braced + " " + Self.format(Double(histogram.count)) + "\n"
    }

    /// `name="value",…` without braces, each value escaped.
    static func labelList(_ labels: [(String, String)]) -> String {
        var list = ""
        for (index, (name, value)) in labels.enumerated() {
            if index > 0 { list += "," }
            list += name + "=\"" + escaped(value) + "\""
        }
        return list
    }

    /// The `le` label of each finite bucket, as `format` writes its bound.
    private static let bucketLabels = CommandMetrics.bucketBounds.map(format)

    /// Makes a label value safe inside its quotes, as the format asks (backslash, double quote, newline).
    static let escaped = ASCIIEscaping(["\\": "\\\\", "\"": "\\\"", "\n": "\\n"])

    static func format(_ value: Double) -> String {
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return "\(value)"
    }
}
