#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Values kept by claim and found by command id as well, each in constant time.
///
/// A bus host keeps its running tickets and its finished claims waiting for their events by
/// claim, and is asked about them by command id: a cancel names the command, and the event
/// forwarder reports every command that ends here. Two claims of one command can be held at once
/// (``BusHost/Claim``), so a command id finds all of its claims.
struct ClaimTable<Value> {
    private var byCommand: [UUID: [BusHost.Claim: Value]] = [:]

    /// An empty table.
    init() {}

    /// The value kept for `claim`; setting `nil` removes it.
    subscript(claim: BusHost.Claim) -> Value? {
        get { byCommand[claim.id]?[claim] }
        set {
            if let newValue {
                byCommand[claim.id, default: [:]][claim] = newValue
            } else {
                _ = remove(claim)
            }
        }
    }

    /// Takes `claim`'s value out, if it is kept.
    @discardableResult
    mutating func remove(_ claim: BusHost.Claim) -> Value? {
        guard let value = byCommand[claim.id]?.removeValue(forKey: claim) else { return nil }
        if byCommand[claim.id]?.isEmpty == true { byCommand[claim.id] = nil }
        return value
    }

    /// Takes out the value of one claim of command `id`, if any is kept.
    mutating func removeAny(of id: UUID) -> Value? {
        guard let claim = byCommand[id]?.keys.first else { return nil }
        return remove(claim)
    }

    /// The values kept for the claims of command `id`.
    func values(of id: UUID) -> [Value] {
        byCommand[id].map { Array($0.values) } ?? []
    }

    /// Every claim kept.
    var claims: [BusHost.Claim] { byCommand.values.flatMap(\.keys) }

    /// Every value kept.
    var values: [Value] { byCommand.values.flatMap(\.values) }
}
