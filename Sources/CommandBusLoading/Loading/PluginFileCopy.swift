import CLinux
import CommandBusSupport
import Glibc

/// A plugin file copied, under its own name, into a directory made for it, to be opened as a
/// new image and then removed (the mapping outlives the file).
struct PluginFileCopy {
    /// The copy.
    let path: String
    /// The directory made for it.
    let directory: String

    /// Copies `source` into a new directory under `parent`.
    /// - Parameter number: Makes the directory's name unique in this process.
    init(of source: String, under parent: String, number: Int) throws(PluginLoadFailure) {
        var template = Array(FileSystem.join(parent, "cmdbus-\(getpid())-\(number)-XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw .init("in \(parent): cannot make a directory (\(Self.errorText()))")
        }
        directory = String(cString: made)
        path = FileSystem.join(directory, FileSystem.lastComponent(source))
        if let reason = Self.copy(source, to: path) {
            rmdir(directory)
            throw .init("in \(parent): cannot copy it (\(reason))")
        }
    }

    /// Removes the copy and its directory.
    func remove() {
        unlink(path)
        rmdir(directory)
    }

    /// Copies a file's bytes, inside the kernel (`copy_file_range`: shared, not copied, where
    /// the file system can), else through a buffer; `nil` on success, else why not.
    private static func copy(_ source: String, to target: String) -> String? {
        let input = open(source, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { return errorText() }
        defer { close(input) }
        let output = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o500)
        guard output >= 0 else { return errorText() }
        var failure = copyInKernel(input, output) ? nil : copyThroughBuffer(input, output)
        if close(output) != 0, failure == nil { failure = errorText() }
        if failure != nil { unlink(target) }
        return failure
    }

    /// Whether `copy_file_range` copied the rest of `input`; `false` where the kernel or the
    /// file systems cannot, with both files' offsets where it stopped.
    private static func copyInKernel(_ input: Int32, _ output: Int32) -> Bool {
        while true {
            let copied = copy_file_range(input, nil, output, nil, 1 << 30, 0)
            if copied == 0 { return true }
            if copied < 0 && errno == EINTR { continue }
            if copied < 0 { return false }
        }
    }

    /// Copies the rest of `input` (from its offset) through a buffer; `nil` on success, else why not.
    private static func copyThroughBuffer(_ input: Int32, _ output: Int32) -> String? {
        var buffer = [UInt8](repeating: 0, count: 256 * 1024)
        while true {
            let got = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
            if got < 0 && errno == EINTR { continue }
            if got < 0 { return errorText() }
            if got == 0 { return nil }
            var written = 0
            while written < got {
                let put = buffer.withUnsafeBytes { write(output, $0.baseAddress! + written, got - written) }
                if put < 0 && errno == EINTR { continue }
                if put <= 0 { return errorText() }
                written += put
            }
        }
    }

    private static func errorText() -> String { String(cString: strerror(errno)) }
}
