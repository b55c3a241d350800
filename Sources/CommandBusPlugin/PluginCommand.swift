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
}
