import Glibc

/// What Linux says of this process in `/proc`: the figures Prometheus's client libraries
/// export as `process_*` (README: "Metrics"), and what ``IdleMemoryTrim`` measures.
package struct ProcessFigures: Sendable {
    /// CPU time spent, user and system, in seconds.
    package var cpuSeconds: Double
    /// Resident memory, in bytes.
    package var residentBytes: Int
    /// Virtual memory, in bytes.
    package var virtualBytes: Int
    /// Threads.
    package var threads: Int
    /// When the process started, in seconds since 1970.
    package var startTime: Double
    /// File descriptors open.
    package var openDescriptors: Int
    /// The most it may open (`ulimit -n`).
    package var maxDescriptors: Int

    /// The figures now, or `nil` where `/proc` cannot be read.
    package static func now() -> ProcessFigures? {
        // "pid (comm) state ppid …": the name may hold spaces and parentheses, so the fields are
        // counted from the last ')'; field N of proc(5) is at N - 3 after it.
        guard let stat = read("/proc/self/stat"), let close = stat.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: UInt8(ascii: " ")).map { Int(String(decoding: $0, as: UTF8.self)) }
        guard fields.count > 21, let user = fields[11], let system = fields[12], let threads = fields[17],
              let started = fields[19], let virtual = fields[20], let resident = fields[21] else { return nil }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        return ProcessFigures(
            cpuSeconds: Double(user + system) / ticks, residentBytes: resident * sysconf(Int32(_SC_PAGESIZE)), virtualBytes: virtual,
            threads: threads, startTime: Double(bootTime ?? 0) + Double(started) / ticks,
            openDescriptors: openDescriptorCount, maxDescriptors: Int(clamping: limit.rlim_cur)
        )
    }

    /// When the machine booted, in seconds since 1970 (`btime` in `/proc/stat`): read once, not
    /// at every scrape and `status` (the file has a line per CPU).
    private static let bootTime: Int? = {
        guard let stat = read("/proc/stat") else { return nil }
        for line in stat.split(separator: UInt8(ascii: "\n")) where line.starts(with: Array("btime ".utf8)) {
            return Int(String(decoding: line.dropFirst(6), as: UTF8.self))
        }
        return nil
    }()

    /// The entries of `/proc/self/fd`, less the one reading it.
    private static var openDescriptorCount: Int {
        guard let directory = opendir("/proc/self/fd") else { return 0 }
        defer { closedir(directory) }
        var count = 0
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { count += 1 }
        }
        return max(0, count - 1)
    }

    /// A small file of `/proc` whole (their sizes read as 0, so it is read until its end).
    private static func read(_ path: String) -> [UInt8]? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { Glibc.close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4_096)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            bytes += chunk[..<count]
        }
        return bytes.isEmpty ? nil : bytes
    }
}
