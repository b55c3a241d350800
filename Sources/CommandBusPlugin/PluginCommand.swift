/// A command a plugin handles: a `Codable` value with a stable routing name and a `Codable` result.
///
/// It has the same shape as the host's `Command`; only its JSON crosses the plugin boundary.
/// ```swift
/// struct Greet: PluginCommand {
///     typealias Result = Greeting
///     static let name = "greet"
///     var name: String
/// }
/// ```
public protocol PluginCommand: Codable, Sendable {
    /// The value the handler produces.
    associatedtype Result: Codable, Sendable
    /// The stable routing name, such as `"greet"`.
    static var name: String { get }
    /// Whether the command has an inverse: `true` for a ``ReversiblePluginCommand``. You need
    /// not implement it; it spares the plugin a runtime conformance check when it loads, whose
    /// cost grows with every image loaded before it.
    static var isReversible: Bool { get }
}

extension PluginCommand {
    /// No inverse, unless the command is a ``ReversiblePluginCommand``.
    public static var isReversible: Bool { false }
}
