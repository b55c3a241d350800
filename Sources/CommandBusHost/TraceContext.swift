import CommandBusSupport

/// W3C Trace Context: the `traceparent` a caller puts in a command's metadata (or a socket
/// request's `traceparent` field) so a tracing system can follow the command into the bus.
///
/// The bus keeps it on the command's subcommands (metadata is inherited), shows it on the
/// dashboard's command page and writes it in the server's log lines.
package enum TraceContext {
    /// The metadata key.
    package static let key = "traceparent"

    /// Whether `value` is a `traceparent` of version 00: `00-<32 hex>-<16 hex>-<2 hex>`, lowercase,
    /// with neither id all zeros.
    package static func isValid(_ value: String) -> Bool {
        let parts = value.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "00" else { return false }
        let lengths = [2, 32, 16, 2]
        for (part, length) in zip(parts, lengths) {
            guard part.utf8.count == length, part.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) else { return false }
        }
        return parts[1].contains { $0 != "0" } && parts[2].contains { $0 != "0" }
    }

    /// The one-line error for a bad value, saying what the form is.
    package static func problem(_ value: String) -> String {
        "traceparent \(quoted(value)) is not a W3C trace context; use 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>, lowercase"
    }

    /// The trace id of a valid `traceparent` in `metadata`, for log lines.
    package static func traceID(in metadata: [String: String]) -> String? {
        guard let value = metadata[key], isValid(value) else { return nil }
        return String(value.split(separator: "-")[1])
    }
}
