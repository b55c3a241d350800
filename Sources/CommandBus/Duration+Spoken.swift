extension Duration {
    /// The duration as a message says it: whole seconds as a count ("1 second", "10 seconds"),
    /// where `Duration`'s own description says "1.0 seconds"; anything finer as that does
    /// ("0.5 seconds", "1.2 seconds").
    package var spoken: String {
        let (seconds, attoseconds) = components
        guard attoseconds == 0 else { return "\(self)" }
        return "\(seconds) \(seconds == 1 ? "second" : "seconds")"
    }
}
