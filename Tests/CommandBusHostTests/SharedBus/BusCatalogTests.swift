import CommandBus
import CommandBusPostgres
import Foundation
import Testing

/// `cmdbus plugins --bus` merged every live host's catalog by appending them: ten hosts that
/// load one plugin listed it ten times, a plugin directory missing on one host's machine made
/// a client elsewhere exit 66 ("create it, or name another with --plugins"), and nothing said
/// when hosts ran different builds of a plugin, where a command's answer then depends on which
/// host claims it.
struct BusCatalogTests {
    private static func plugin(_ name: String, version: String = "1.0.0", path: String, sha256: String, commands: [String]) -> JSONValue {
        .object([
            "name": .string(name), "version": .string(version), "path": .string(path), "sha256": .string(sha256),
            "commands": .array(commands.map(JSONValue.string)), "priority": .integer(0), "abi": .string("1.4"),
            "loadedAt": .string("2026-11-26T20:00:00.000Z"), "loadMilliseconds": .number(Double(path.count)),
        ])
    }

    private static func route(_ command: String, _ plugin: String, path: String, shadowing: [String] = []) -> JSONValue {
        .object([
            "command": .string(command), "plugin": .string(plugin), "path": .string(path),
            "shadowed": .array(shadowing.map { .object(["plugin": .string($0), "path": .string("/p/\($0).so")]) }),
        ])
    }

    private static func host(_ label: String, directory: String, plugins: [JSONValue], routes: [JSONValue], skipped: [JSONValue] = []) -> BusCatalog.Host {
        BusCatalog.Host(id: "id-\(label)", label: label, catalog: [
            "directories": .array([.string(directory)]), "plugins": .array(plugins), "commands": .array(routes), "skipped": .array(skipped),
        ])
    }

    private static func objects(_ value: JSONValue?) -> [[String: JSONValue]] {
        value?.arrayValue?.compactMap(\.objectValue) ?? []
    }

    @Test
    func aBuildSeveralHostsLoadIsListedOnceWithItsHosts() {
        let missing = JSONValue.object(["path": .string("/gone"), "reason": .string("plugin directory does not exist"), "quarantined": .bool(false)])
        let catalog = BusCatalog.merge([
            Self.host("a:1", directory: "/srv/plugins", plugins: [Self.plugin("greeter", path: "/srv/plugins/libGreeter.so", sha256: "aa", commands: ["greet"])],
                      routes: [Self.route("greet", "greeter", path: "/srv/plugins/libGreeter.so")], skipped: [missing]),
            Self.host("b:2", directory: "/opt/plugins", plugins: [Self.plugin("greeter", path: "/opt/plugins/libGreeter.so", sha256: "aa", commands: ["greet"])],
                      routes: [Self.route("greet", "greeter", path: "/opt/plugins/libGreeter.so")], skipped: [missing]),
            Self.host("c:3", directory: "/srv/plugins", plugins: [], routes: []),
        ]).objectValue ?? [:]

        let plugins = Self.objects(catalog["plugins"])
        #expect(plugins.count == 1 && plugins[0]["name"] == .string("greeter") && plugins[0]["path"] == .string("/srv/plugins/libGreeter.so"))
        let copies = Self.objects(plugins.first?["hosts"])
        #expect(copies.map { $0["host"] } == [.string("a:1"), .string("b:2")])
        #expect(copies.map { $0["path"] } == [.string("/srv/plugins/libGreeter.so"), .string("/opt/plugins/libGreeter.so")], "each host's own file")
        let routes = Self.objects(catalog["commands"])
        #expect(routes.count == 1 && routes[0]["hosts"] == .array([.string("a:1"), .string("b:2")]))
        let skipped = Self.objects(catalog["skipped"])
        #expect(skipped.count == 1 && skipped[0]["hosts"] == .array([.string("a:1"), .string("b:2")]))
        #expect(catalog["directories"] == .array([.string("/srv/plugins"), .string("/opt/plugins")]))
        #expect(Self.objects(catalog["hosts"]).map { $0["host"] } == [.string("a:1"), .string("b:2"), .string("c:3")])
        #expect(catalog["differences"] == .array([]), "one build, the same routes: nothing differs")
    }

    @Test
    func buildsOfOnePluginAreListedSideBySideAndNamedAsADifference() throws {
        let catalog = BusCatalog.merge([
            Self.host("a:1", directory: "/p", plugins: [
                Self.plugin("greeter", path: "/p/libGreeter.so", sha256: "1111111111111111", commands: ["greet"]),
                Self.plugin("counter", path: "/p/libCounter.so", sha256: "cc", commands: ["counter.add"]),
            ], routes: [Self.route("greet", "greeter", path: "/p/libGreeter.so"), Self.route("counter.add", "counter", path: "/p/libCounter.so")]),
            Self.host("b:2", directory: "/p", plugins: [Self.plugin("greeter", path: "/p/libGreeter.so", sha256: "2222222222222222", commands: ["greet"])],
                      routes: [Self.route("greet", "greeter", path: "/p/libGreeter.so")]),
            Self.host("c:3", directory: "/p", plugins: [Self.plugin("greeter", version: "1.1.0", path: "/p/libGreeter.so", sha256: "33", commands: ["greet"])],
                      routes: [Self.route("greet", "greeter", path: "/p/libGreeter.so")]),
        ]).objectValue ?? [:]

        let plugins = Self.objects(catalog["plugins"])
        #expect(plugins.map { $0["name"]?.stringValue ?? "" } == ["greeter", "greeter", "greeter", "counter"], "a plugin's builds together")
        #expect(Self.objects(catalog["commands"]).count == 2, "the same plugin takes 'greet' everywhere")
        let differences = Self.objects(catalog["differences"])
        try #require(differences.count == 1)
        #expect(differences[0]["plugin"] == .string("greeter"))
        #expect(Self.objects(differences[0]["builds"]).map { $0["hosts"] } == [.array([.string("a:1")]), .array([.string("b:2")]), .array([.string("c:3")])])
        let message = differences[0]["message"]?.stringValue ?? ""
        #expect(message.hasPrefix("plugin 'greeter' differs between hosts: version 1.0.0 (file 111111111111) on a:1; version 1.0.0 (file 222222222222) on b:2; version 1.1.0 (file 33) on c:3;"), "\(message)")
    }

    @Test
    func aCommandOnePluginTakesOnSomeHostsAndAnotherOnOthersIsADifference() throws {
        let greeter = Self.plugin("greeter", path: "/p/libGreeter.so", sha256: "aa", commands: ["greet"])
        let catalog = BusCatalog.merge([
            Self.host("a:1", directory: "/p", plugins: [greeter, Self.plugin("bonjour", path: "/p/bonjour.so", sha256: "bb", commands: ["greet"])],
                      routes: [Self.route("greet", "bonjour", path: "/p/bonjour.so", shadowing: ["greeter"])]),
            Self.host("b:2", directory: "/p", plugins: [greeter], routes: [Self.route("greet", "greeter", path: "/p/libGreeter.so")]),
            Self.host("c:3", directory: "/p", plugins: [greeter], routes: [Self.route("greet", "greeter", path: "/p/libGreeter.so")]),
        ]).objectValue ?? [:]

        let differences = Self.objects(catalog["differences"])
        try #require(differences.count == 1)
        #expect(differences[0]["command"] == .string("greet"))
        #expect(differences[0]["message"]?.stringValue?.hasPrefix("command 'greet' is taken by 'bonjour' on a:1, by 'greeter' on b:2, c:3;") == true,
                "\(differences[0]["message"]?.stringValue ?? "")")
    }

    @Test
    func manyHostsAreNamedUpToALimit() {
        #expect(BusCatalog.hostList((1...10).map { "h:\($0)" }) == "h:1, h:2, h:3, h:4, h:5, h:6, h:7, h:8 and 2 more")
        #expect(BusCatalog.hostList(["h:1"]) == "h:1")
    }
}
