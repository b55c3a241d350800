@testable import CommandBusLoading
import Foundation
import Testing

/// A plugin the dynamic linker refuses for what this machine lacks (a library it links, a mount
/// that lets code run) is named with the cause and what to do, and is not refused for good:
/// once the machine is mended, the same file loads, with no `plugins forget`.
struct PluginMachineRefusalTests {
    /// Found by hand: a plugin on a `noexec` mount stayed skipped, with the linker's bare
    /// "failed to map segment from shared object" (its path twice), after the mount allowed code
    /// again: the probe's refusal was cached as the file's verdict until the file changed.
    @Test func aPluginWhoseLibraryIsMissingLoadsOnceTheLibraryIsThere() async throws {
        let work = try TemporaryDirectory("cmdbus-needs-library")
        defer { work.remove() }
        let plugins = try work.subdirectory("plugins"), libraries = try work.subdirectory("lib")
        let library = try await compileFixture("needs_library", into: libraries, as: "libcmdbus_needed.so", defines: ["NEEDED_LIBRARY"])
        let linked = try await runProcess("/usr/bin/env", [
            "cc", "-shared", "-fPIC", "-O1", "-I", TestPaths.headerDirectory.path, "-o", plugins.file("libneeds.so").path,
            TestPaths.badPluginSources.appendingPathComponent("needs_library.c").path,
            "-L", libraries.path, "-lcmdbus_needed", "-Wl,-rpath,\(libraries.path)",
        ])
        try #require(linked.status == 0, "cc: \(linked.stderr)")
        let aside = work.file("libcmdbus_needed.so.aside")
        try FileManager.default.moveItem(at: library, to: aside)
        let environment = ["CMDBUS_REGISTRY": work.file("registry.json").path]

        let refused = try await cmdbus(["run", "needed.answer", "--no-journal", "--plugins", plugins.path], environment: environment)
        #expect(refused.status == 69, "\(refused.stderr)")
        #expect(refused.stderr.contains(
            "skipped \(plugins.file("libneeds.so").path): libcmdbus_needed.so: cannot open shared object file: No such file or directory; "
                + "the plugin links a library this machine does not have: install it, or put it where the plugin's rpath or LD_LIBRARY_PATH looks"
        ), "\(refused.stderr)")

        try FileManager.default.moveItem(at: aside, to: library)
        let answered = try await cmdbus(["run", "needed.answer", "--no-journal", "--plugins", plugins.path], environment: environment)
        #expect(answered.status == 0 && answered.stdout == "{\"answer\":42}\n", "\(answered.stdout)\(answered.stderr)")
    }

    /// The same on a file system mounted `noexec`, then remounted to allow code: in a mount
    /// namespace of the script's own, as root.
    @Test(.enabled(if: getuid() == 0, "needs root to mount a file system"))
    func aPluginOnANoExecMountLoadsOnceTheMountAllowsCode() async throws {
        let work = try TemporaryDirectory("cmdbus-noexec")
        defer { work.remove() }
        let disk = try work.subdirectory("disk")
        let script = #"""
            mount -t tmpfs -o size=16m,noexec tmpfs "$1" && mkdir "$1/plugins" && cp "$3" "$1/plugins/" || exit 9
            "$2" run greet -p name=Ada --no-journal --plugins "$1/plugins"; echo "== $?"
            mount -o remount,exec "$1" || exit 9
            "$2" run greet -p name=Ada --no-journal --plugins "$1/plugins"; echo "== $?"
            """#
        let result = try await runInOwnMountNamespace(script, on: disk, environment: ["CMDBUS_REGISTRY": work.file("registry.json").path])
        #expect(result.stdout.split(separator: "\n").filter { $0.hasPrefix("== ") } == ["== 69", "== 0"], "\(result.stdout)\(result.stderr)")
        #expect(result.stderr.contains(
            "libGreeter.so: its file system is mounted noexec, where no code may run (failed to map segment from shared object); "
                + "use a directory on one that allows it, or remount it without noexec"
        ), "\(result.stderr)")
        #expect(result.stdout.contains("Hello, Ada!"), "\(result.stdout)")
    }

    /// The linker's message loses the path it begins with (whoever reports it names the file);
    /// one without advice keeps its words.
    @Test func theLinkersMessageIsWordedWithoutThePathTwice() {
        #expect(SharedLibrary.worded("/p/libx.so: undefined symbol: f", path: "/p/libx.so")
            == "undefined symbol: f; the plugin uses a symbol none of the libraries it links provides: link the library that has it, or rebuild the plugin")
        #expect(SharedLibrary.worded("/p/libx.so: cannot enable executable stack as shared object requires: Invalid argument", path: "/p/libx.so")
            == "cannot enable executable stack as shared object requires: Invalid argument")
        #expect(SharedLibrary.worded("/other/liby.so: invalid ELF header", path: "/p/libx.so") == "/other/liby.so: invalid ELF header")
    }
}
