import CCommandBusABI
import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// The `cmdbus_host_api` table every plugin gets: complete, send, emit, log, is_cancelled, envelope, progress.
///
/// It is built once and never freed; plugins may keep the pointer for the life of the process.
package enum HostFunctionTable {
    // Written once, then only read, for the life of the process.
    package nonisolated(unsafe) static let pointer: UnsafePointer<cmdbus_host_api> = {
        let table = UnsafeMutablePointer<cmdbus_host_api>.allocate(capacity: 1)
        table.initialize(to: cmdbus_host_api(
            struct_size: UInt32(MemoryLayout<cmdbus_host_api>.size),
            abi_major: UInt32(CMDBUS_ABI_VERSION_MAJOR),
            abi_minor: UInt32(CMDBUS_ABI_VERSION_MINOR),
            complete: hostComplete,
            send: hostSend,
            emit: hostEmit,
            log: hostLog,
            is_cancelled: hostIsCancelled,
            envelope: hostEnvelope,
            progress: hostProgress
        ))
        return UnsafePointer(table)
    }()
}

private let hostComplete: @convention(c) (OpaquePointer?, Int32, cmdbus_bytes) -> Void = { handle, status, body in
    guard let call = PluginCallRegistry.lookup(handle, for: "complete()") else { return }
    if !call.complete(status: status, body: Data(borrowing: body)) { call.endpoint.warnAboutHandle("complete()") }
}

private let hostSend: @convention(c) (OpaquePointer?, UnsafePointer<CChar>?, cmdbus_bytes, cmdbus_reply_fn?, UnsafeMutableRawPointer?) -> Void = {
    handle, name, payload, onReply, userData in
    guard let onReply else { return }
    let reply = ReplyCallback(function: onReply, userData: userData)
    guard let call = PluginCallRegistry.lookup(handle, for: "send()"), let context = call.context else {
        reply.deliver(status: Int32(CMDBUS_FAILED.rawValue), body: Data("send: unknown or completed parent call".utf8))
        return
    }
    guard let name, let commandName = Optional(String(cString: name)), !commandName.isEmpty else {
        reply.deliver(status: Int32(CMDBUS_FAILED.rawValue), body: Data("send: no command name".utf8))
        return
    }
    let bytes = Data(borrowing: payload)
    Task {
        do throws(CommandBusError) {
            let result = try await context.send(name: commandName, payload: bytes)
            reply.deliver(status: Int32(CMDBUS_OK.rawValue), body: result)
        } catch {
            reply.deliver(status: ABIStatus.status(for: error), body: Data(error.message.utf8))
        }
    }
}

private let hostEmit: @convention(c) (OpaquePointer?, UnsafePointer<CChar>?, cmdbus_bytes) -> Void = { handle, name, payload in
    guard let call = PluginCallRegistry.lookup(handle, for: "emit()"), let context = call.context, let name else { return }
    let event = String(cString: name), bytes = Data(borrowing: payload)
    // An event's payload crosses as JSON: one that is not reaches its readers as null.
    if let problem = PluginEndpoint.eventPayloadProblem(bytes) { call.endpoint.warnAboutEventPayload(event, problem) }
    context.emit(event, payload: bytes)
}

private let hostLog: @convention(c) (OpaquePointer?, Int32, UnsafePointer<CChar>?) -> Void = { handle, level, message in
    guard let message else { return }
    let text = String(cString: message)
    let logLevel = LogLevel.allCases.indices.contains(Int(level)) ? LogLevel.allCases[Int(level)] : .info
    // A log line may come with no call at all (from init(), say): that is no misuse.
    let call = handle == nil ? nil : PluginCallRegistry.lookup(handle, for: "log()")
    if let context = call?.context {
        context.log(logLevel, text)
    } else if let call {
        call.endpoint.log(logLevel, text)
    } else if handle == nil {
        PluginLog.standardError()(logLevel, text)
    }
}

private let hostProgress: @convention(c) (OpaquePointer?, Int64, Int64) -> Void = { handle, done, total in
    guard let context = PluginCallRegistry.lookup(handle, for: "progress()")?.context else { return }
    context.progress(done: Int(clamping: done), total: Int(clamping: total))
}

private let hostIsCancelled: @convention(c) (OpaquePointer?) -> Int32 = { handle in
    guard let call = PluginCallRegistry.lookup(handle, for: "is_cancelled()") else { return 1 }
    return (call.context?.isCancelled ?? false) ? 1 : 0
}

private let hostEnvelope: @convention(c) (OpaquePointer?, cmdbus_reply_fn?, UnsafeMutableRawPointer?) -> Void = { handle, onReply, userData in
    guard let onReply else { return }
    let reply = ReplyCallback(function: onReply, userData: userData)
    guard let context = PluginCallRegistry.lookup(handle, for: "envelope()")?.context,
          let json = try? JSONEncoder().encode(context.envelope) else {
        reply.deliver(status: Int32(CMDBUS_FAILED.rawValue), body: Data("envelope: unknown or completed call".utf8))
        return
    }
    reply.deliver(status: Int32(CMDBUS_OK.rawValue), body: json)
}


/// A plugin's `on_reply` callback and its `user_data`, kept until the answer arrives
/// (in the host, from the task that sends a subcommand; in a worker, from the host's reply frame).
package struct ReplyCallback: @unchecked Sendable {
    // user_data belongs to the plugin, which promised it stays valid until on_reply is called.
    package let function: cmdbus_reply_fn
    package let userData: UnsafeMutableRawPointer?

    package func deliver(status: Int32, body: some ContiguousBytes) {
        body.withUnsafeBytes { raw in
            function(userData, status, cmdbus_bytes(data: raw.bindMemory(to: UInt8.self).baseAddress, length: raw.count))
        }
    }
}

/// Translation between `CommandBusError` codes and ABI status values.
package enum ABIStatus {
    package static func status(for error: CommandBusError) -> Int32 {
        switch error.code {
        case .decodingFailed: Int32(CMDBUS_DECODING_FAILED.rawValue)
        case .cancelled: Int32(CMDBUS_CANCELLED.rawValue)
        case .noHandler: Int32(CMDBUS_NO_HANDLER.rawValue)
        case .timedOut: Int32(CMDBUS_TIMED_OUT.rawValue)
        default: error.isRetryable ? Int32(CMDBUS_FAILED_RETRYABLE.rawValue) : Int32(CMDBUS_FAILED.rawValue)
        }
    }
}

extension Data {
    /// Copies bytes a plugin lent for the length of a call.
    package init(borrowing bytes: cmdbus_bytes) {
        if let data = bytes.data, bytes.length > 0 {
            self.init(bytes: data, count: bytes.length)
        } else {
            self.init()
        }
    }
}
