import Glibc

/// The few file-system facts the loader needs, straight from the C library.
package enum FileSystem {
    /// What a path names, following symlinks.
    package enum Kind: Equatable {
        case missing, danglingSymlink(target: String), directory, regularFile(size: Int), other
        /// A symlink that leads back to itself, through `target` (too many links to follow).
        case symlinkLoop(target: String)
    }

    package static func kind(of path: String) -> Kind {
        var info = stat()
        if stat(path, &info) == 0 {
            switch info.st_mode & S_IFMT {
            case S_IFDIR: return .directory
            case S_IFREG: return .regularFile(size: Int(info.st_size))
            default: return .other
            }
        }
        let loops = errno == ELOOP
        var linkInfo = stat()
        if lstat(path, &linkInfo) == 0, linkInfo.st_mode & S_IFMT == S_IFLNK {
            let target = linkTarget(path) ?? "?"
            return loops ? .symlinkLoop(target: target) : .danglingSymlink(target: target)
        }
        return .missing
    }

    package static func linkTarget(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let length = readlink(path, &buffer, buffer.count - 1)
        guard length >= 0 else { return nil }
        return String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Up to `count` bytes from the start of the file, or `nil` if it cannot be read.
    package static func readPrefix(of path: String, count: Int) -> [UInt8]? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let got = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress! + filled, count - filled, off_t(filled)) }
            if got < 0 && errno == EINTR { continue }
            if got <= 0 { break }
            filled += got
        }
        return Array(bytes[..<filled])
    }

    /// The whole file, or `nil` if it cannot be read.
    package static func readAll(_ path: String) -> [UInt8]? {
        guard case .regularFile(let size) = kind(of: path) else { return nil }
        return readPrefix(of: path, count: size)
    }

    /// The owner, permission bits and inode facts of a path (following symlinks), or of the link itself.
    package struct Status: Equatable {
        package let owner: UInt32
        package let mode: UInt32
        package let size: Int
        package let modified: Int64
        package let inode: UInt64
        /// The device the inode is on: with `inode`, which file this is.
        package let device: UInt64
        package let isSymlink: Bool

        /// Whether this is the file `other` was, with the bytes it had: the same inode, size and
        /// time of last write, whatever became of its owner or mode since.
        package func hasSameContents(as other: Status) -> Bool {
            device == other.device && inode == other.inode && size == other.size && modified == other.modified
        }
    }

    package static func status(of path: String, followingLinks: Bool = true) -> Status? {
        var info = stat()
        guard (followingLinks ? stat(path, &info) : lstat(path, &info)) == 0 else { return nil }
        return Status(
            owner: info.st_uid, mode: UInt32(info.st_mode), size: Int(info.st_size),
            modified: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec),
            inode: UInt64(info.st_ino), device: UInt64(info.st_dev), isSymlink: info.st_mode & S_IFMT == S_IFLNK
        )
    }

    /// The canonical absolute path, with every symlink resolved; `nil` if it does not exist.
    package static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// Writes `text` to `path` through a temporary file and a rename, so readers never see half
    /// of it; `nil` once written, else why not (`strerror` of the failure).
    @discardableResult
    package static func writeAtomically(_ text: String, to path: String, mode: mode_t = 0o644) -> String? {
        let temporary = path + ".tmp-\(getpid())"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)
        guard descriptor >= 0 else { return String(cString: strerror(errno)) }
        let bytes = Array(text.utf8)
        let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        var failure = written == bytes.count ? nil : String(cString: strerror(written < 0 ? errno : ENOSPC))
        if failure == nil, fsync(descriptor) != 0 { failure = String(cString: strerror(errno)) }
        close(descriptor)
        if failure == nil, rename(temporary, path) != 0 { failure = String(cString: strerror(errno)) }
        if failure != nil { unlink(temporary) }
        return failure
    }

    /// Whether `path`, or the nearest directory above it that exists, is on a file system mounted
    /// read-only, where no permission lets anyone write.
    package static func isOnReadOnlyFileSystem(_ path: String) -> Bool { mountFlags(of: path) & UInt(ST_RDONLY) != 0 }

    /// Whether `path`, or the nearest directory above it that exists, is on a file system mounted
    /// `noexec`, where no file is run or mapped as code.
    package static func isOnNoExecFileSystem(_ path: String) -> Bool { mountFlags(of: path) & noExecFlag != 0 }

    /// `ST_NOEXEC`, a GNU extension the Glibc module leaves out.
    private static let noExecFlag: UInt = 8

    /// The mount flags (`statvfs`'s `f_flag`) of the file system that holds `path` or, if there
    /// is nothing at `path`, the nearest directory above it that exists; 0 if none can be read.
    private static func mountFlags(of path: String) -> UInt {
        var candidate = path
        while kind(of: candidate) == .missing {
            let parent = parentDirectory(of: candidate)
            guard parent != candidate else { return 0 }
            candidate = parent
        }
        var info = statvfs()
        return statvfs(candidate, &info) == 0 ? info.f_flag : 0
    }

    /// The names in a directory, or `nil` if it cannot be read.
    package static func entries(of directory: String) -> [String]? {
        guard let stream = opendir(directory) else { return nil }
        defer { closedir(stream) }
        var names: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// `directory/name`, without doubling a trailing slash.
    package static func join(_ directory: String, _ name: String) -> String {
        directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }

    /// The directory that holds `path`: `.` for a bare name, `/` for a name at the root; a
    /// trailing slash is not a component.
    package static func parentDirectory(of path: String) -> String {
        let trimmed = path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
        guard let slash = trimmed.lastIndex(of: "/") else { return "." }
        return slash == trimmed.startIndex ? "/" : String(trimmed[..<slash])
    }

    /// Makes `path` a directory, with any missing directories above it, each with `mode`
    /// (less the umask); `nil` once it is one, else why not (`strerror` of the first failure).
    package static func makeDirectories(_ path: String, mode: mode_t) -> String? {
        switch kind(of: path) {
        case .directory: return nil
        case .missing: break
        default: return "\(path) exists and is not a directory"
        }
        let parent = parentDirectory(of: path)
        if parent != path, let failure = makeDirectories(parent, mode: mode) { return failure }
        guard mkdir(path, mode) == 0 || errno == EEXIST else { return "cannot make \(path): \(String(cString: strerror(errno)))" }
        return nil
    }

    /// The last component of a path.
    package static func lastComponent(_ path: String) -> String {
        path.split(separator: "/").last.map(String.init) ?? path
    }
}
