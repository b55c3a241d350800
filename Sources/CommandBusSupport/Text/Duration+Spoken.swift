extension Duration {
    /// The duration as a message says it: whole seconds as a count ("1 second", "10 seconds"),
    /// where `Duration`'s own description says "1.0 seconds"; anything finer as that does
    /// ("0.5 seconds", "1.2 seconds"). Every module's messages use this one; the core, which
    /// imports nothing of the host's, keeps a copy for its own (`CommandBusError.timedOut`).
    package var spoken: String {
        let (seconds, attoseconds) = components
        guard attoseconds == 0 else { return "\(self)" }
        return counted(Int(seconds), "second")
    }
}
