import CommandBusSupport
import Foundation
import Synchronization
import Testing

/// Where the package, its build products and the ABI header are.
enum TestPaths {
    static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The build products: `$CMDBUS_BIN_DIR` (scripts/test.sh sets it), else `.build/debug`.
    static let binDirectory: URL = {
        if let explicit = ProcessInfo.processInfo.environment["CMDBUS_BIN_DIR"], !explicit.isEmpty {
            return URL(fileURLWithPath: explicit)
        }
        return packageRoot.appendingPathComponent(".build/debug")
    }()

    /// Whether the products are a release build (scripts/test.sh runs the end-to-end suites
    /// against one after the debug run): the binary users run, optimized.
    static var productsAreReleaseBuilds: Bool { binDirectory.lastPathComponent == "release" }

    static let headerDirectory = packageRoot.appendingPathComponent("Sources/CCommandBusABI/include")
    static let badPluginSources = packageRoot.appendingPathComponent("Tests/Fixtures/BadPlugins")

    /// A built product, such as `libGreeter.so` or `cmdbus`; fails the test if it was not built.
    static func product(_ name: String) throws -> URL {
        let url = binDirectory.appendingPathComponent(name)
        try #require(FileManager.default.fileExists(atPath: url.path), "\(url.path) is missing: run scripts/test.sh, which builds every product")
        return url
    }
}

/// A fresh directory under the system's temporary directory, removed by `remove()`.
struct TemporaryDirectory {
    let url: URL
    var path: String { url.path }

    init(_ label: String = "cmdbus-test") throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("\(label)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func subdirectory(_ name: String) throws -> TemporaryDirectory {
        let child = url.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: child, withIntermediateDirectories: true)
        return TemporaryDirectory(existing: child)
    }

    private init(existing: URL) { url = existing }

    func file(_ name: String) -> URL { url.appendingPathComponent(name) }

    func remove() { try? FileManager.default.removeItem(at: url) }

    /// Copies the named build products (e.g. `libGreeter.so`) in, each under a temporary name
    /// then renamed, so a server's hot loading sees it appear whole.
    func install(_ products: String...) throws {
        for product in products {
            let partial = file(product + ".partial")
            try copyClosingOnExec(try TestPaths.product(product), to: partial)
            guard rename(partial.path, file(product).path) == 0 else {
                throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: file(product).path])
            }
        }
    }
}

/// Copies a file through a descriptor opened close-on-exec. Foundation's `copyItem` opens its
/// copy without `O_CLOEXEC`: a process another test starts meanwhile inherits it, and its exit
/// closes a file written to, which a server's hot loading hears under the file's name of that
/// moment, after a rename too (a run of the tests saw a 21st "unchanged" close where a test made 20).
func copyClosingOnExec(_ source: URL, to target: URL, mode: mode_t = 0o755) throws {
    let bytes = try Data(contentsOf: source)
    let descriptor = open(target.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
    guard descriptor >= 0 else { throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: target.path]) }
    let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
    try handle.write(contentsOf: bytes)
    try handle.close()
}

/// Compiles `Tests/Fixtures/BadPlugins/<name>.c` into `<directory>/<output>` with the system C compiler.
@discardableResult
func compileFixture(
    _ name: String, into directory: TemporaryDirectory, as output: String? = nil, defines: [String] = []
) async throws -> URL {
    let target = directory.file(output ?? "\(name).so")
    let result = try await runProcess("/usr/bin/env", [
        "cc", "-shared", "-fPIC", "-O1", "-I", TestPaths.headerDirectory.path,
    ] + defines.map { "-D\($0)" } + [
        "-o", target.path, TestPaths.badPluginSources.appendingPathComponent("\(name).c").path,
    ])
    try #require(result.status == 0, "cc failed for \(name).c: \(result.stderr)")
    return target
}

/// Runs `script` with `/bin/sh` in a mount namespace of its own, as root, so a file system it
/// mounts needs no unmounting if the test dies: `$1` is `directory` (where to mount one), `$2`
/// the `cmdbus` binary and `$3` the Greeter plugin.
func runInOwnMountNamespace(_ script: String, on directory: TemporaryDirectory, environment: [String: String] = [:]) async throws -> ProcessResult {
    try await runProcess("/usr/bin/unshare", [
        "--mount", "--propagation", "private", "/bin/sh", "-c", script, "sh", directory.path,
        try TestPaths.product("cmdbus").path, try TestPaths.product("libGreeter.so").path,
    ], environment: environment)
}

/// What a finished process printed and how it exited.
struct ProcessResult {
    /// The exit code, or 128 plus the signal that ended it, as a shell reports one (137: SIGKILL,
    /// which is also how a process still running at the test's deadline ends).
    let status: Int32
    let stdout: String
    let stderr: String
}

/// Runs a program to completion, capturing stdout and stderr through files; one still
/// running after `timeout` is killed (and so fails whatever the test expected of it).
///
/// It waits without blocking a thread: the tests share a small cooperative pool with the code they test.
@discardableResult
func runProcess(
    _ executable: String, _ arguments: [String], environment: [String: String] = [:],
    directory: URL? = nil, timeout: Duration = .seconds(60)
) async throws -> ProcessResult {
    let scratch = try TemporaryDirectory("cmdbus-process")
    defer { scratch.remove() }
    let process = try LaunchedProcess(
        executable, arguments, environment: environment, directory: directory?.path,
        standardOutput: .file(scratch.file("out").path), standardError: .file(scratch.file("err").path)
    )
    let watchdog = Task {
        try await Task.sleep(for: timeout)
        process.send(SIGKILL)
    }
    defer { watchdog.cancel() }
    let status: Int32 = switch await process.wait() {
    case .exited(let code): code
    case .signaled(let signal): 128 + signal
    case .killedAtDeadline: 128 + SIGKILL
    }
    return ProcessResult(
        status: status,
        stdout: (try? String(contentsOf: scratch.file("out"), encoding: .utf8)) ?? "",
        stderr: (try? String(contentsOf: scratch.file("err"), encoding: .utf8)) ?? ""
    )
}

/// Runs a program and returns its stdout, or `nil` if it cannot start: for the conditions
/// `waitUntil` polls. It waits without holding a thread of the cooperative pool.
func stdoutOf(_ executable: URL, _ arguments: [String]) async -> String? {
    (try? await runProcess(executable.path, arguments, timeout: .seconds(30)))?.stdout
}

/// Runs the built `cmdbus` binary, by default in a fresh working directory (so its default
/// journal, ./.cmdbus/journal.sqlite, is the test's own).
func cmdbus(_ arguments: String..., environment: [String: String] = [:], directory: URL? = nil) async throws -> ProcessResult {
    try await cmdbus(arguments, environment: environment, directory: directory)
}

/// Runs the built `cmdbus` binary with an argument array.
func cmdbus(_ arguments: [String], environment: [String: String] = [:], directory: URL? = nil) async throws -> ProcessResult {
    let scratch = try TemporaryDirectory("cmdbus-cwd")
    defer { scratch.remove() }
    // Each run gets its own probe registry unless the test chose one.
    let environment = ["CMDBUS_REGISTRY": scratch.file("registry.json").path].merging(environment) { _, chosen in chosen }
    return try await runProcess(try TestPaths.product("cmdbus").path, arguments, environment: environment, directory: directory ?? scratch.url)
}

/// A directory holding the three example plugins.
func examplePluginDirectory() throws -> TemporaryDirectory {
    let directory = try TemporaryDirectory("cmdbus-plugins")
    try directory.install("libGreeter.so", "libGreetAll.so", "libCEcho.so")
    return directory
}

func json(_ text: String) -> Data { Data(text.utf8) }

func jsonObject(_ text: String) throws -> [String: Any] {
    try #require(JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "not a JSON object: \(text)")
}

/// Runs `body`; if it has not ended within `limit`, says on stderr and as an issue of the test
/// what it still waits for. A test that hangs past its time limit names only itself; this names
/// the await that hangs, while the test goes on waiting for it.
/// - Parameter diagnose: What to say of the state of things then, beside the await's name.
@discardableResult
func naming<T>(
    _ what: String, within limit: Duration = .seconds(60), diagnose: (@Sendable () -> String)? = nil, _ body: () async throws -> T
) async rethrows -> T {
    let watchdog = Task {
        try await Task.sleep(for: limit)
        let diagnosis = diagnose.map { "; \($0())" } ?? ""
        FileHandle.standardError.write(Data("test still waits, after \(limit.spoken), for \(what)\(diagnosis)\n".utf8))
        Issue.record("still waiting, after \(limit.spoken), for \(what)\(diagnosis)")
    }
    defer { watchdog.cancel() }
    return try await body()
}

/// Waits until `condition` holds, polling every `interval`, for at most `timeout`: for conditions
/// that run a process or ask a server, which must not hold a thread of the small cooperative
/// pool every test shares (a test starved of it fails for no reason of its own).
func waitUntil(
    _ timeout: Duration = .seconds(60), every interval: Duration = .milliseconds(50), _ condition: @Sendable () async -> Bool
) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if await condition() { return true }
        try? await Task.sleep(for: interval)
    }
    return await condition()
}

/// Waits until `condition` holds, polling, for at most `timeout`.
func waitUntil(_ timeout: Duration = .seconds(60), _ condition: @Sendable () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(2))
    }
    return condition()
}

/// The dashboard's address a `cmdbus serve --http` logged (`dashboard on http://127.0.0.1:PORT/ …`),
/// once it has.
func dashboardURL(in log: String) -> String? {
    guard let line = log.split(separator: "\n").first(where: { $0.contains("dashboard on ") }) else { return nil }
    return line.split(separator: " ").first { $0.hasPrefix("http://") }.map { String($0.dropLast()) }
}

/// Starts a child as ``LaunchedProcess`` does, and kills it when this process exits if it still
/// runs then. A test's cleanup put in a `Task` by a `defer` never runs after the run's last
/// test, and a failed `#require` skips the cleanup after it: hosts of the shared bus went on
/// claiming from the test cluster after the run ended, and `cmdbus serve`s on waiting.
func launchedChild(
    _ executable: String, _ arguments: [String], environment: [String: String] = [:], directory: String? = nil,
    standardOutput: LaunchedProcess.Output = .inherit, standardError: LaunchedProcess.Output = .inherit
) throws(LaunchFailure) -> LaunchedProcess {
    let child = try LaunchedProcess(
        executable, arguments, environment: environment, directory: directory, standardOutput: standardOutput, standardError: standardError
    )
    ChildrenKilledAtExit.add(child)
    return child
}

/// The children ``launchedChild(_:_:environment:directory:standardOutput:standardError:)``
/// started: those still running when this process exits get SIGKILL (an ended one's id is not
/// signalled, so no other process's is).
enum ChildrenKilledAtExit {
    private static let children = Mutex<[LaunchedProcess]>([])
    private static let killAtExit: Void = { atexit { ChildrenKilledAtExit.killTheRunningOnes() } }()

    static func add(_ child: LaunchedProcess) {
        _ = killAtExit
        children.withLock { children in
            children.removeAll { !$0.isRunning }
            children.append(child)
        }
    }

    private static func killTheRunningOnes() {
        for child in children.withLock({ $0 }) { child.send(SIGKILL) }
    }
}

/// The servers of one kind that tests started and have not stopped: each test stops what an
/// earlier, failed one left (a deferred async stop may not run before the test process exits;
/// after the run's last test, ``ChildrenKilledAtExit`` ends what is left).
final class StartedProcesses<Server: AnyObject & Sendable>: Sendable {
    private let servers = Mutex<[Server]>([])

    func add(_ server: Server) { servers.withLock { $0.append(server) } }

    /// Every one added and not taken yet, for stopping.
    func takeAll() -> [Server] {
        servers.withLock { servers in
            defer { servers = [] }
            return servers
        }
    }
}

/// This process's private copies of plugins (`cmdbus-PID-N-…` in `TMPDIR`) still there after
/// up to 10 s. The loader removes each once it is open (or refused); other tests in this
/// process load plugins at the same time, each through a copy of its own for a moment (CI
/// rehearsals caught such copies twice), so only a copy that stays is one left behind.
func privateCopiesLeftBehind() async -> [String] {
    let tmp = ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp"
    let copies = { @Sendable in
        ((try? FileManager.default.contentsOfDirectory(atPath: tmp)) ?? []).filter { $0.hasPrefix("cmdbus-\(getpid())-") }
    }
    _ = await waitUntil(.seconds(10)) { copies().isEmpty }
    return copies()
}
