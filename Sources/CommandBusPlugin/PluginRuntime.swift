import CCommandBusABI
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The plugin side of the ABI: the descriptor, and the C functions that run Swift handlers.
///
/// Each plugin links its own copy of this SDK, so each has its own runtime.
final class PluginRuntime: Sendable {
    let handlers: [PluginHandlerBox]
    private let hostTable = Mutex<HostFunctions?>(nil)
    /// The Swift tasks of handle() calls not yet completed, by call handle, so cancel() can reach them.
    private let inFlight = Mutex<[UInt: InFlightCall]>([:])

    private init(handlers: [PluginHandlerBox]) {
        self.handlers = handlers
    }

    var host: HostFunctions? { hostTable.withLock { $0 } }

    /// Builds the runtime and its descriptor; both live for the life of the process.
    static func install(_ plugin: Plugin) -> UnsafeRawPointer {
        let boxes = plugin.handlers.map { PluginHandlerBox($0) }
        let runtime = PluginRuntime(handlers: boxes)
        let commands = UnsafeMutablePointer<cmdbus_command_descriptor>.allocate(capacity: max(boxes.count, 1))
        for (index, box) in boxes.enumerated() {
            commands[index] = cmdbus_command_descriptor(
                name: UnsafePointer(strdup(box.commandName)), max_concurrency: Int32(box.maxConcurrency ?? 0)
            )
        }
        let flags = UnsafeMutablePointer<UInt32>.allocate(capacity: max(boxes.count, 1))
        for (index, box) in boxes.enumerated() { flags[index] = box.flags }
        let descriptor = UnsafeMutablePointer<cmdbus_plugin_descriptor>.allocate(capacity: 1)
        descriptor.initialize(to: cmdbus_plugin_descriptor(
            magic: CMDBUS_PLUGIN_MAGIC,
            abi_major: UInt32(CMDBUS_ABI_VERSION_MAJOR),
            abi_minor: UInt32(CMDBUS_ABI_VERSION_MINOR),
            struct_size: UInt32(MemoryLayout<cmdbus_plugin_descriptor>.size),
            name: UnsafePointer(strdup(plugin.name)),
            version: UnsafePointer(strdup(plugin.version)),
            sdk_version: UnsafePointer(strdup(commandBusPluginSDKVersion)),
            swift_version: UnsafePointer(strdup(swiftCompilerVersion)),
            priority: plugin.priority,
            command_count: UInt32(boxes.count),
            commands: UnsafePointer(commands),
            init: pluginInit,
            can_handle: pluginCanHandle,
            handle: pluginHandle,
            cancel: pluginCancel,
            command_flags: UnsafePointer(flags),
            invert: pluginInvert,
            plugin_flags: Self.pluginFlags
        ))
        installed.withLock { $0 = runtime }
        return UnsafeRawPointer(descriptor)
    }

    fileprivate static let installed = Mutex<PluginRuntime?>(nil)

    /// `CMDBUS_PLUGIN_DEBUG_BUILD` when this copy of the SDK, and so the plugin, was built without
    /// optimization (SwiftPM defines DEBUG in debug builds), so the host can say so.
    /// Always `CMDBUS_PLUGIN_HANDLE_DECIDES`: handle() checks `canHandle` itself (on the command it
    /// decodes anyway), so the host calls the plugin once per command.
    static var pluginFlags: UInt32 {
        #if DEBUG
        CMDBUS_PLUGIN_DEBUG_BUILD | CMDBUS_PLUGIN_HANDLE_DECIDES
        #else
        CMDBUS_PLUGIN_HANDLE_DECIDES
        #endif
    }

    fileprivate func start(_ index: Int, payload: Data, call: CallHandle, host: HostFunctions) {
        let key = call.key
        let entry = InFlightCall()
        inFlight.withLock { $0[key] = entry }
        let box = handlers[index]
        let context = PluginContext(host: host, call: call)
        // The host calls handle() from the command's own task, off any UI thread; starting the
        // handler immediately on this thread saves a scheduling hop until it first suspends.
        let task = Task.immediate {
            let (status, body) = await Self.run(box, payload: payload, context: context)
            self.inFlight.withLock { _ = $0.removeValue(forKey: key) }
            host.complete(call, status: status, body: body)
        }
        entry.attach(task)
    }

    fileprivate func cancel(_ call: CallHandle) {
        inFlight.withLock { $0[call.key] }?.cancel()
    }

    private static func run(_ box: PluginHandlerBox, payload: Data, context: PluginContext) async -> (Int32, Data) {
        do {
            return (Int32(CMDBUS_OK.rawValue), try await box.handle(payload, context))
        } catch let error as PluginError {
            return (error.status.rawValue, Data(error.message.utf8))
        } catch is CancellationError {
            return (PluginError.Status.cancelled.rawValue, Data("cancelled".utf8))
        } catch let error as any RetryablePluginError {
            return (PluginError.Status.retryable.rawValue, Data(String(describing: error).utf8))
        } catch {
            return (PluginError.Status.failed.rawValue, Data(String(describing: error).utf8))
        }
    }

    fileprivate func attach(host table: UnsafePointer<cmdbus_host_api>) {
        hostTable.withLock { $0 = HostFunctions(table: table) }
    }
}

/// A handle() call's Swift task, and whether cancel() came before the task was attached.
private final class InFlightCall: Sendable {
    private let state = Mutex<(task: Task<Void, Never>?, cancelled: Bool)>((nil, false))

    func attach(_ task: Task<Void, Never>) {
        let cancelNow = state.withLock { state -> Bool in
            state.task = task
            return state.cancelled
        }
        if cancelNow { task.cancel() }
    }

    func cancel() {
        let task = state.withLock { state -> Task<Void, Never>? in
            state.cancelled = true
            return state.task
        }
        task?.cancel()
    }
}

private func runtime(_ state: UnsafeMutableRawPointer?) -> PluginRuntime? {
    state.map { Unmanaged<PluginRuntime>.fromOpaque($0).takeUnretainedValue() }
}

private let pluginInit: @convention(c) (UnsafePointer<cmdbus_host_api>?, UnsafeMutablePointer<UnsafeMutableRawPointer?>?) -> Int32 = { table, state in
    guard let table, let state, let runtime = PluginRuntime.installed.withLock({ $0 }) else { return 1 }
    runtime.attach(host: table)
    state.pointee = Unmanaged.passRetained(runtime).toOpaque()
    return 0
}

private let pluginCanHandle: @convention(c) (UnsafeMutableRawPointer?, UInt32, cmdbus_bytes, OpaquePointer?) -> Int32 = { state, index, payload, call in
    guard let runtime = runtime(state), Int(index) < runtime.handlers.count else { return -Int32(CMDBUS_FAILED.rawValue) }
    do {
        return try runtime.handlers[Int(index)].canHandle(Data(payload)) ? 1 : 0
    } catch let error as PluginError {
        if let call { runtime.host?.complete(CallHandle(pointer: call), status: error.status.rawValue, body: Data(error.message.utf8)) }
        return -error.status.rawValue
    } catch {
        return -Int32(CMDBUS_FAILED.rawValue)
    }
}

private let pluginHandle: @convention(c) (UnsafeMutableRawPointer?, UInt32, cmdbus_bytes, OpaquePointer?) -> Void = { state, index, payload, call in
    guard let call, let runtime = runtime(state), let host = runtime.host else { return }
    guard Int(index) < runtime.handlers.count else {
        host.complete(CallHandle(pointer: call), status: Int32(CMDBUS_FAILED.rawValue), body: Data("no command at index \(index)".utf8))
        return
    }
    runtime.start(Int(index), payload: Data(payload), call: CallHandle(pointer: call), host: host)
}

private let pluginInvert: @convention(c) (UnsafeMutableRawPointer?, UInt32, cmdbus_bytes, OpaquePointer?) -> Int32 = { state, index, payload, call in
    guard let runtime = runtime(state), Int(index) < runtime.handlers.count else { return -Int32(CMDBUS_FAILED.rawValue) }
    do {
        guard let inverse = try runtime.handlers[Int(index)].invert(Data(payload)) else { return 1 }
        if let call { runtime.host?.complete(CallHandle(pointer: call), status: Int32(CMDBUS_OK.rawValue), body: inverse) }
        return 0
    } catch let error as PluginError {
        if let call { runtime.host?.complete(CallHandle(pointer: call), status: error.status.rawValue, body: Data(error.message.utf8)) }
        return -error.status.rawValue
    } catch {
        return -Int32(CMDBUS_FAILED.rawValue)
    }
}

private let pluginCancel: @convention(c) (UnsafeMutableRawPointer?, OpaquePointer?) -> Void = { state, call in
    guard let call, let runtime = runtime(state) else { return }
    runtime.cancel(CallHandle(pointer: call))
}

extension Data {
    /// Copies borrowed ABI bytes.
    init(_ bytes: cmdbus_bytes) {
        if let data = bytes.data, bytes.length > 0 {
            self.init(bytes: data, count: bytes.length)
        } else {
            self.init()
        }
    }
}
