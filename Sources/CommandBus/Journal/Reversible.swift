#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A command that can be undone by sending another command: its inverse.
///
/// ```swift
/// struct Add: Command, Reversible {
///     typealias Result = Int
///     static let name = "counter.add"
///     var by: Int
///     func inverse() -> Add { Add(by: -by) }
/// }
/// ```
public protocol Reversible: Command {
    /// The command that undoes this one.
    associatedtype Inverse: Command
    /// The command that undoes this one.
    func inverse() -> Inverse
}

extension Reversible {
    /// The inverse as a name and JSON payload.
    func encodedInverse() throws(CommandBusError) -> (name: String, payload: Data) {
        let inverse = inverse()
        do { return (Inverse.name, try JSONWire.encode(inverse)) } catch {
            throw .encodingFailed(Inverse.name, cause: error)
        }
    }
}
