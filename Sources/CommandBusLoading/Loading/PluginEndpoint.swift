import CommandBus
import CommandBusSupport
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// One loaded plugin as the call table knows it: the source of its call ids, its log, and the
/// warnings it has earned.
///
/// A call id is `plugin number << 44 | sequence`. Ids are never reused, so a handle a plugin
/// keeps after `complete()` can never reach a later call, its own or another plugin's; and an
/// unknown handle still names the plugin that used it.
package final class PluginEndpoint: Sendable {
    /// The plugin's name.
    package let name: String
    /// The plugin's file name.
    package let fileName: String
    /// Where its warnings and command-less log lines go.
    package let log: PluginLog
    private let number: UInt64
    private let sequence = Atomic<UInt64>(0)
    private let warnedAboutHandles = Atomic<Bool>(false)
    private let warnedAboutEventPayloads = Atomic<Bool>(false)

    private static let sequenceBits: UInt64 = 44
    private static let numbers = Atomic<UInt64>(0)
    /// Every endpoint by number: a handle's number names its plugin even after the call is gone.
    /// Process-wide because the plugins are: a library loaded into the process stays loaded.
    private static let byNumber = Mutex<[UInt64: PluginEndpoint]>([:])

    /// A new endpoint with a number no other plugin in this process has.
    package init(name: String, fileName: String, log: PluginLog) {
        self.name = name
        self.fileName = fileName
        self.log = log
        number = Self.numbers.wrappingAdd(1, ordering: .relaxed).newValue & ((1 << (64 - Self.sequenceBits)) - 1)
        Self.byNumber.withLock { [self] in $0[number] = self }
    }

    /// A call id never used before.
    package func nextCallID() -> UInt64 {
        number << Self.sequenceBits | (sequence.wrappingAdd(1, ordering: .relaxed).newValue & ((1 << Self.sequenceBits) - 1))
    }

    /// The endpoint whose call ids include `id`, if any.
    package static func owner(ofCall id: UInt64) -> PluginEndpoint? {
        byNumber.withLock { $0[id >> sequenceBits] }
    }

    /// Warns, once for this plugin, that it used a finished or unknown call handle.
    package func warnAboutHandle(_ function: String) {
        guard !warnedAboutHandles.exchange(true, ordering: .relaxed) else { return }
        log(.warning, "plugin '\(quotedLine(name))' (\(fileName)) called \(function) with a call handle that is finished or unknown; "
            + "ignored (this is reported once per plugin; the plugin keeps a handle after complete())")
    }

    /// Warns, once for this plugin, that it emitted an event whose payload is not JSON (`problem`
    /// says how), which the event's readers get as null.
    package func warnAboutEventPayload(_ event: String, _ problem: String) {
        guard !warnedAboutEventPayloads.exchange(true, ordering: .relaxed) else { return }
        log(.warning, Self.eventPayloadWarning(plugin: name, file: fileName, event: event, problem: problem))
    }

    /// What is wrong with an event's `payload`, if it is not JSON.
    package static func eventPayloadProblem(_ payload: some Collection<UInt8> & ContiguousBytes) -> String? {
        payload.isEmpty ? "it is empty" : JSONValue.syntaxError(in: payload)
    }

    /// The warning for an event whose payload is not JSON, in process and isolated.
    package static func eventPayloadWarning(plugin: String, file: String, event: String, problem: String) -> String {
        "plugin '\(quotedLine(plugin))' (\(file)) emitted '\(quotedLine(event))' with a payload that is not JSON (\(problem)); "
            + "the event carries null (this is reported once per plugin; an event's payload is JSON, {} for none, so the plugin needs fixing)"
    }

    /// Warns about a handle no plugin's ids include: once per process, on standard error.
    package static func warnAboutForeignHandle(_ function: String) {
        guard !warnedAboutForeign.exchange(true, ordering: .relaxed) else { return }
        PluginLog.standardError()(.warning, "a plugin called \(function) with a call handle the host never issued; ignored")
    }
    private static let warnedAboutForeign = Atomic<Bool>(false)
}
