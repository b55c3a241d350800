import CommandBusLoading

/// Plugin files by state, as the overview and `/metrics` count them, each file once: loaded and
/// serving; quarantined, by the probe before it loaded or, loaded isolated, for its worker's
/// crashes (its commands fail until the file is loaded anew); or skipped for another reason.
struct PluginFileCounts: Equatable {
    var loaded: Int
    var quarantined: Int
    var skipped: Int

    init(_ catalog: PluginCatalog) {
        let stoppedWorkers = catalog.plugins.count { $0.quarantine != nil }
        let refusedByTheProbe = catalog.skipped.filter(\.isQuarantined).count
        loaded = catalog.plugins.count - stoppedWorkers
        quarantined = refusedByTheProbe + stoppedWorkers
        skipped = catalog.skipped.count - refusedByTheProbe
    }
}
