#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension Date {
    /// The time in ISO 8601, UTC, to the millisecond (`2026-11-26T09:15:10.123Z`): how the
    /// journal's JSON, the server's JSON log and the plugin list write times. Whole seconds
    /// would hide the order of what happened within one.
    package var timestamp: String { formatted(Self.timestampStyle) }

    private static let timestampStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
}
