/// A request to do one piece of work, small enough to serialize, journal and replay.
///
/// A command names itself with a stable routing ``name`` and declares the
/// `Codable` ``Result`` its handler produces.
///
/// ```swift
/// struct Greet: Command {
///     typealias Result = Greeting
///     static let name = "greet"
///     var name: String
/// }
/// struct Greeting: Codable, Sendable { var greeting: String }
/// ```
public protocol Command: Codable, Sendable {
    /// The value a handler produces for this command.
    associatedtype Result: Codable, Sendable

    /// The stable routing name, such as `"greet"`. Plugins and the CLI route by it.
    static var name: String { get }
}

/// The result of a command that produces nothing worth returning.
public struct NoResult: Codable, Sendable, Hashable {
    /// Creates the empty result.
    public init() {}
}
