import CommandBusSupport
import Foundation
import Glibc
import Testing

/// `cmdbus serve` under a service manager that waits for `READY=1` (systemd's `Type=notify`):
/// the test plays the manager, a datagram socket named in `$NOTIFY_SOCKET`.
struct ServiceNotifierTests {
    /// The manager's end: a Unix datagram socket at a path or, for `@name`, in the abstract namespace.
    final class Listener: @unchecked Sendable {
        let address: String
        private let descriptor: Int32

        init(address: String) throws {
            self.address = address
            descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            var bytes = Array(address.utf8)
            if bytes.first == UInt8(ascii: "@") { bytes[0] = 0 }
            var socketAddress = sockaddr_un()
            socketAddress.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &socketAddress.sun_path) { $0.copyBytes(from: bytes) }
            let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count)
            let bound = withUnsafePointer(to: &socketAddress) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) }
            }
            try #require(descriptor >= 0 && bound == 0, "cannot bind \(address): \(String(cString: strerror(errno)))")
        }

        deinit { close(descriptor) }

        /// The next datagram within `timeout`, or `nil`.
        func next(within timeout: Duration = .seconds(30)) -> String? {
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, Int32(timeout.components.seconds * 1000)) == 1 else { return nil }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = recv(descriptor, &buffer, buffer.count, 0)
            return count > 0 ? String(decoding: buffer[..<count], as: UTF8.self) : nil
        }
    }

    @Test func aServerSaysWhenItIsReadyWhatItDoesAndWhenItStops() async throws {
        let work = try TemporaryDirectory("cmdbus-notify")
        defer { work.remove() }
        let listener = try Listener(address: work.file("notify.sock").path)
        let server = try await ServerTests.Server(work: work, environment: ["NOTIFY_SOCKET": listener.address])
        defer { server.process.send(SIGKILL) }
        // The server's path is relative to its directory; the manager is told the full one.
        let socket = try #require(FileSystem.realPath(server.socket))
        let ready = try #require(listener.next())
        #expect(ready == "READY=1\nSTATUS=serving on \(socket): 3 plugins, 0 in flight, 0 succeeded, 0 failed\n")

        let greeted = try await cmdbus(["run", "greet", "-p", "name=Ada", "--connect", server.socket])
        #expect(greeted.status == 0)
        // Every five seconds, what it has done so far.
        let status = try #require(listener.next(within: .seconds(15)))
        #expect(status == "STATUS=serving on \(socket): 3 plugins, 0 in flight, 1 succeeded, 0 failed\n")

        server.process.send(SIGTERM)
        var stopping: String?
        while stopping == nil, let message = listener.next() {
            if message.hasPrefix("STOPPING=1\n") { stopping = message }
        }
        #expect(stopping == "STOPPING=1\nSTATUS=draining 0 commands for up to 10 seconds\n")
        #expect(await server.process.wait() == .exited(0))
    }

    /// An address in the abstract namespace (`@name`), as systemd gives in containers.
    @Test func anAbstractAddressIsTold() async throws {
        let listener = try Listener(address: "@cmdbus-test-\(UUID().uuidString)")
        let server = try await ServerTests.Server(environment: ["NOTIFY_SOCKET": listener.address])
        defer { server.work.remove() }
        #expect(listener.next()?.hasPrefix("READY=1\nSTATUS=serving on ") == true)
        await server.stop()
    }

    /// Under `WatchdogSec=` the server says `WATCHDOG=1` at half the interval, each time its
    /// request loop has run a job, and goes on through a drain: a manager that heard nothing
    /// for the interval would kill a server finishing its work.
    @Test(.timeLimit(.minutes(2)))
    func aWatchdogHearsFromTheServerWhileItServesAndWhileItDrains() async throws {
        let work = try TemporaryDirectory("cmdbus-watchdog")
        defer { work.remove() }
        let listener = try Listener(address: work.file("notify.sock").path)
        let server = try await ServerTests.Server(
            work: work, environment: ["NOTIFY_SOCKET": listener.address, "WATCHDOG_USEC": "400000", "WATCHDOG_PID": String(getpid())]
        )
        defer { server.process.send(SIGKILL) }
        // WATCHDOG_PID names this test, not the server: a watchdog meant for another process is none.
        #expect(try #require(listener.next()).hasPrefix("READY=1\n"))
        #expect(listener.next(within: .seconds(2)) == nil, "a watchdog meant for another process was kept")
        server.process.send(SIGKILL)
        _ = await server.process.wait()

        let watched = try await ServerTests.Server(work: work, environment: ["NOTIFY_SOCKET": listener.address, "WATCHDOG_USEC": "400000"])
        defer { watched.process.send(SIGKILL) }
        var messages: [String] = []
        let serving = ContinuousClock.now
        while ContinuousClock.now - serving < .seconds(3), let message = listener.next(within: .seconds(2)) { messages.append(message) }
        #expect(messages.first?.hasPrefix("READY=1\n") == true, "\(messages)")
        // Every 0.2 s: about 14 in 3 s; a loaded machine may run them late, not never.
        #expect(messages.count { $0 == "WATCHDOG=1\n" } >= 5, "\(messages)")

        // A command the drain waits 3 s for, by the test's word, not the clock's: the pings go on
        // until the server exits. (With a command of 3 s started 0.5 s before the signal, a
        // loaded machine started it late, and the drain had under a second left: 2 pings.)
        let released = work.file("released").path
        let sleeping = Task {
            try await cmdbus([
                "run", "fixture.sleep", "-p", "milliseconds=60000", "-p", "stubborn=true", "-p", "untilFileExists=\(released)", "--connect", watched.socket,
            ])
        }
        #expect(await waitUntil(.seconds(30)) { (try? await cmdbus(["status", "--connect", watched.socket]))?.stdout.contains(" 1 in flight") == true })
        watched.process.send(SIGTERM)
        messages = []
        let signalled = ContinuousClock.now
        while ContinuousClock.now - signalled < .seconds(3), let message = listener.next(within: .seconds(1)) { messages.append(message) }
        #expect(FileManager.default.createFile(atPath: released, contents: nil))
        while let message = listener.next(within: .seconds(5)) { messages.append(message) }
        let stopping = try #require(messages.firstIndex { $0.hasPrefix("STOPPING=1\n") }, "\(messages)")
        #expect(messages[stopping...].count { $0 == "WATCHDOG=1\n" } >= 5, "\(messages)")
        let slept = try await sleeping.value
        #expect(slept.status == 0, "\(slept.stderr)\n\((try? String(contentsOfFile: watched.log, encoding: .utf8)) ?? "")")
        #expect(await watched.process.wait() == .exited(0))
    }

    /// `$WATCHDOG_USEC` is a count of microseconds; anything else keeps no watchdog, and the
    /// server's log says why and what to set.
    @Test func aWatchdogIntervalThatIsNotACountOfMicrosecondsIsRefusedInTheLog() async throws {
        let work = try TemporaryDirectory("cmdbus-watchdog")
        defer { work.remove() }
        let listener = try Listener(address: work.file("notify.sock").path)
        let server = try await ServerTests.Server(work: work, environment: ["NOTIFY_SOCKET": listener.address, "WATCHDOG_USEC": "30s"])
        #expect(try #require(listener.next()).hasPrefix("READY=1\n"))
        await server.stop()
        let log = try String(contentsOfFile: server.log, encoding: .utf8)
        #expect(log.contains("WATCHDOG_USEC='30s' is not a positive whole number of microseconds, so no watchdog is kept; set WatchdogSec= in the unit to a duration such as 30s"), "\(log)")

        let address = work.file("notify.sock").path
        #expect(ServiceNotifier(address: address, watchdogMicroseconds: "30000000").watchdog == .seconds(30))
        #expect(ServiceNotifier(address: address, watchdogMicroseconds: "30000000", watchdogPID: String(getpid())).watchdog == .seconds(30))
        for refused in ["0", "-5", "", "1e6", "30000000 "] {
            let notifier = ServiceNotifier(address: address, watchdogMicroseconds: refused)
            #expect(notifier.watchdog == nil && notifier.watchdogProblem != nil, "\(refused)")
        }
        // None meant for this process, or none to tell: no watchdog, and nothing wrong.
        for notifier in [
            ServiceNotifier(address: address, watchdogMicroseconds: "30000000", watchdogPID: "1"),
            ServiceNotifier(address: nil, watchdogMicroseconds: "30000000"),
            ServiceNotifier(address: address),
        ] {
            #expect(notifier.watchdog == nil && notifier.watchdogProblem == nil)
        }
    }

    /// Addresses that are not a Unix socket's, or none, tell nothing; the server runs the same.
    @Test(arguments: [nil, "", "@", "relative/notify.sock", "vsock:2:1234", "/" + String(repeating: "x", count: 200)])
    func anUnusableAddressTellsNothing(address: String?) {
        #expect(!ServiceNotifier(address: address).isEnabled)
    }
}

extension SharedBusTests {
    /// A host of the shared bus is ready once it has joined, says what it has done, and that it
    /// leaves when told to stop.
    @Test(.timeLimit(.minutes(2)))
    func aBusHostTellsItsServiceManagerWhenItHasJoined() async throws {
        let database = try await SharedBusDatabase()
        defer { Task { await database.drop() } }
        let listener = try ServiceNotifierTests.Listener(address: "@cmdbus-test-\(UUID().uuidString)")
        let host = try await BusHostProcess(bus: database.url, plugins: ["libGreeter.so"], environment: ["NOTIFY_SOCKET": listener.address])
        let joining = try #require(listener.next())
        #expect(joining.hasPrefix("STATUS=joining the bus at postgresql:///"), "\(joining)")
        let ready = try #require(listener.next())
        #expect(ready.hasPrefix("READY=1\nSTATUS=host ") && ready.hasSuffix(": 1 plugin, 0 in flight, 0 succeeded, 0 failed\n"), "\(ready)")
        let sent = try await Self.bus(database.url, "run", "greet", "-p", "name=Ada")
        #expect(sent.status == 0)
        let status = try #require(listener.next(within: .seconds(15)))
        #expect(status.hasSuffix(": 1 plugin, 0 in flight, 1 succeeded, 0 failed\n"), "\(status)")
        host.signal(SIGTERM)
        var stopping: String?
        while stopping == nil, let message = listener.next() {
            if message.hasPrefix("STOPPING=1\n") { stopping = message }
        }
        #expect(stopping == "STOPPING=1\nSTATUS=draining 0 commands for up to 10 seconds, then leaving the bus\n")
        await host.stop()
    }
}
