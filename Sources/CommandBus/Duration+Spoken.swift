extension Duration {
    /// The duration as the core's messages say it ("1 second", "10 seconds", "0.5 seconds"):
    /// the core's own copy of `CommandBusSupport`'s `Duration.spoken`, which the host's modules
    /// use and the core cannot import. Internal, so a module that imports both sees one.
    var spoken: String {
        let (seconds, attoseconds) = components
        guard attoseconds == 0 else { return "\(self)" }
        return "\(seconds) \(seconds == 1 ? "second" : "seconds")"
    }
}
