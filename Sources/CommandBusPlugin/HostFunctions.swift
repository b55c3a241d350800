import CCommandBusABI
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A host's `cmdbus_call` handle. The host keeps it valid until the call is completed,
/// and its functions may be called from any thread (see cmdbus.h).
struct CallHandle: @unchecked Sendable {
    let pointer: OpaquePointer
    var key: UInt { UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(pointer))) }
}

/// Swift wrappers over the host's `cmdbus_host_api` table.
struct HostFunctions: @unchecked Sendable {
    // The table lives for the life of the process (see cmdbus.h), so keeping the pointer is safe.
    let table: UnsafePointer<cmdbus_host_api>

    func complete(_ call: CallHandle, status: Int32, body: Data) {
        guard let complete = table.pointee.complete else { return }
        body.withUnsafeBytes { raw in
            complete(call.pointer, status, cmdbus_bytes(data: raw.bindMemory(to: UInt8.self).baseAddress, length: raw.count))
        }
    }

    func emit(_ call: CallHandle, _ name: String, _ payload: Data) {
        guard let emit = table.pointee.emit else { return }
        payload.withUnsafeBytes { raw in
            emit(call.pointer, name, cmdbus_bytes(data: raw.bindMemory(to: UInt8.self).baseAddress, length: raw.count))
        }
    }

    func log(_ call: CallHandle?, _ level: PluginLogLevel, _ message: String) {
        table.pointee.log?(call?.pointer, level.rawValue, message)
    }

    /// The envelope JSON of the command behind `call`, from a host that offers it (ABI 1.2).
    func envelope(_ call: CallHandle) -> Data? {
        let needed = MemoryLayout<cmdbus_host_api>.offset(of: \cmdbus_host_api.envelope)! + MemoryLayout<UnsafeRawPointer>.size
        guard Int(table.pointee.struct_size) >= needed, let envelope = table.pointee.envelope else { return nil }
        let box = EnvelopeBox()
        envelope(call.pointer, { userData, status, body in
            let box = Unmanaged<EnvelopeBox>.fromOpaque(userData!).takeUnretainedValue()
            if status == Int32(CMDBUS_OK.rawValue) { box.json = Data(body) }
        }, Unmanaged.passUnretained(box).toOpaque())
        return withExtendedLifetime(box) { box.json }
    }

    /// Reports progress to a host that takes it (ABI 1.3).
    func progress(_ call: CallHandle, done: Int, total: Int) {
        let needed = MemoryLayout<cmdbus_host_api>.offset(of: \cmdbus_host_api.progress)! + MemoryLayout<UnsafeRawPointer>.size
        guard Int(table.pointee.struct_size) >= needed, let progress = table.pointee.progress else { return }
        progress(call.pointer, Int64(done), Int64(total))
    }

    func isCancelled(_ call: CallHandle) -> Bool {
        (table.pointee.is_cancelled?(call.pointer) ?? 0) != 0
    }

    func send(parent: CallHandle, name: String, payload: Data) async throws -> Data {
        guard let send = table.pointee.send else {
            throw PluginError(.failed, "the host offers no send function")
        }
        let (status, body) = await withCheckedContinuation { (continuation: CheckedContinuation<(Int32, Data), Never>) in
            let box = Unmanaged.passRetained(ReplyBox(continuation)).toOpaque()
            payload.withUnsafeBytes { raw in
                send(parent.pointer, name, cmdbus_bytes(data: raw.bindMemory(to: UInt8.self).baseAddress, length: raw.count), { userData, status, body in
                    let box = Unmanaged<ReplyBox>.fromOpaque(userData!).takeRetainedValue()
                    let data = body.data.map { Data(bytes: $0, count: body.length) } ?? Data()
                    box.continuation.resume(returning: (status, data))
                }, box)
            }
        }
        guard status == Int32(CMDBUS_OK.rawValue) else {
            throw PluginError(PluginError.Status(rawValue: status), String(decoding: body, as: UTF8.self))
        }
        return body
    }
}

/// Carries a subcommand's continuation through the host's `user_data` pointer.
private final class ReplyBox {
    let continuation: CheckedContinuation<(Int32, Data), Never>
    init(_ continuation: CheckedContinuation<(Int32, Data), Never>) { self.continuation = continuation }
}

/// Receives `host->envelope`'s answer, which arrives before the call returns.
private final class EnvelopeBox {
    var json: Data?
}
