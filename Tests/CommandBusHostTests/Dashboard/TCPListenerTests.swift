import CommandBusHTTP
import Glibc
import Testing

/// `--http`'s listening socket: an address or port it cannot take is named, with the cause and
/// what to do.
struct TCPListenerTests {
    @Test func aPortInUseOrAnAddressNotOfThisMachineSaysWhatToDo() throws {
        let first = try TCPListener.listen(host: "127.0.0.1", port: 0)
        defer { close(first.descriptor) }
        do {
            let second = try TCPListener.listen(host: "127.0.0.1", port: first.port)
            close(second.descriptor)
            Issue.record("listened twice on port \(first.port)")
        } catch {
            #expect(error.message == "cannot listen on 127.0.0.1:\(first.port): the port is in use; stop the other server or pick another port")
        }
        // 192.0.2.1 is kept for documentation: no machine has it.
        do {
            let taken = try TCPListener.listen(host: "192.0.2.1", port: 0)
            close(taken.descriptor)
            Issue.record("listened on an address this machine does not have")
        } catch {
            #expect(error.message.hasPrefix("cannot listen on 192.0.2.1:0: this machine has no such address; give one of its own"), "\(error.message)")
        }
    }

    /// A port below 1024 refused for want of privilege says so; a refusal of another port keeps the system's words.
    @Test func aPrivilegedPortSaysItNeedsRoot() {
        #expect(TCPListener.listenFailure(EACCES, port: 80) == "ports below 1024 need root (or CAP_NET_BIND_SERVICE); pick 1024 or above")
        #expect(TCPListener.listenFailure(EACCES, port: 8080) == String(cString: strerror(EACCES)))
    }
}
