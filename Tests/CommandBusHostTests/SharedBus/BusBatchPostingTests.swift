import CommandBusPostgres
import Foundation
import Testing

extension SharedBusTests {
    /// Posting a batch in one statement keeps what posting one by one promises: a key seen
    /// before (in the bus or earlier in the batch) gives the first command's id and inserts
    /// nothing, a batch sent again (a retry after a lost answer) inserts nothing, and what each
    /// command carries goes in unchanged.
    @Test(.timeLimit(.minutes(2)))
    func aBatchOfPostsKeepsIdempotencyKeysAndRetries() async throws {
        let database = try await SharedBusDatabase()
        let connection = try database.migratedConnection()
        var earlier = BusSubmission(name: "fixture.whoami", payload: Data(#"{"n":0}"#.utf8), metadata: ["idempotency-key": "k2"])
        earlier.failIfUnhandled = false
        let earlierID = try earlier.submit(on: connection).id

        func post(_ n: Int, key: String?) -> BusSubmission {
            var submission = BusSubmission(
                name: "fixture.whoami", payload: Data(#"{"n":\#(n), "bytes": "\u{0}é"}"#.utf8), metadata: key.map { ["idempotency-key": $0, "a": "\"b\\"] } ?? [:]
            )
            submission.failIfUnhandled = false
            submission.delay = n == 2 ? .seconds(60) : .zero
            submission.timeout = n == 1 ? .seconds(5) : nil
            return submission
        }
        let batch = [post(1, key: "k1"), post(2, key: nil), post(3, key: "k1"), post(4, key: "k2"), post(5, key: "")]
        let first = try BusSubmission.submitPosts(batch, on: connection)
        #expect(first.map(\.created) == [true, true, false, false, true])
        #expect(first.map(\.id) == [batch[0].id, batch[1].id, batch[0].id, earlierID, batch[4].id])
        let again = try BusSubmission.submitPosts(batch, on: connection)
        #expect(again.map(\.id) == first.map(\.id) && again.allSatisfy { !$0.created })

        let rows = try await database.sql("""
            SELECT encode(payload, 'hex'), metadata ->> 'a', timeout_ms, run_at > now() + interval '30 seconds', idempotency_key IS NULL
            FROM cmdbus.commands ORDER BY seq
            """)
        func hex(_ submission: BusSubmission) -> String { submission.payload.map { String(format: "%02x", $0) }.joined() }
        let expected = [
            "\(hex(earlier))|||f|f",
            "\(hex(batch[0]))|\"b\\|5000|f|f",
            "\(hex(batch[1]))|||t|t",
            "\(hex(batch[4]))|\"b\\||f|t",
        ]
        #expect(rows.split(separator: "\n").map(String.init) == expected, "\(rows)")
        await database.drop()
    }

    /// A NUL character, which a PostgreSQL `text` column cannot hold, in a batch line's command
    /// name or metadata fails that line alone, posting or sending; it was cut short at the NUL
    /// (one by one) or failed its whole statement with "malformed array literal" (in one).
    @Test(.timeLimit(.minutes(2)))
    func aNulInANameOrMetadataFailsItsLineAlone() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let input = scratch.file("batch.ndjson")
        try Data(#"""
            {"command": "fixture.whoami", "payload": {"n": 1}}
            {"command": "fixture\u0000whoami", "payload": {"n": 2}}
            {"command": "fixture.whoami", "payload": {"n": 3}, "metadata": {"k": "a\u0000b"}}
            {"command": "fixture.whoami", "payload": {"n": 4, "text": "\u0000 in a payload is kept"}}

            """#.utf8).write(to: input)
        let posted = try await Self.bus(database.url, "batch", input.path, "--no-wait")
        let lines = try posted.stdout.split(separator: "\n").map { try jsonObject(String($0)) }
        let states = Dictionary(uniqueKeysWithValues: lines.map { ($0["line"] as? Int ?? 0, $0["state"] as? String ?? "") })
        #expect(posted.status == 1 && states == [1: "pending", 2: "failed", 3: "failed", 4: "pending"], "\(posted.stdout) \(posted.stderr)")
        let refusal = lines.first { $0["line"] as? Int == 2 }?["error"] as? [String: Any]
        // A NUL in a name is refused as every unprintable one is, before the bus sees it.
        #expect(refusal?["code"] as? String == "decodingFailed" && (refusal?["message"] as? String ?? "").contains("is not a command name: it holds a control character (U+0)"), "\(refusal ?? [:])")
        let metadataRefusal = (lines.first { $0["line"] as? Int == 3 }?["error"] as? [String: Any])?["message"] as? String ?? ""
        #expect(metadataRefusal.contains("has a NUL character (\\u0000) in its name or metadata"), "\(metadataRefusal)")
        #expect(try await database.sql("SELECT count(*) FROM cmdbus.commands") == "2\n")

        // Whatever submits, the bus itself never writes such a command cut short.
        let connection = try PGConnection(url: database.url)
        var unstorable = BusSubmission(name: "fixture.whoami", payload: Data("{}".utf8), metadata: ["k": "a\u{0}b"])
        unstorable.failIfUnhandled = false
        #expect(throws: PGError.self) { try unstorable.submit(on: connection) }
        #expect(throws: PGError.self) { try BusSubmission.submitPosts([unstorable], on: connection) }
        #expect(try await database.sql("SELECT count(*) FROM cmdbus.commands") == "2\n")

        let host = try await BusHostProcess(bus: database.url, plugins: ["libFixturePlugin.so"])
        let sent = try await Self.bus(database.url, "batch", input.path)
        let sentStates = try sent.stdout.split(separator: "\n").map { try jsonObject(String($0))["state"] as? String ?? "" }
        #expect(sent.status == 1 && sentStates.sorted() == ["failed", "failed", "succeeded", "succeeded"], "\(sent.stdout) \(sent.stderr)")
        await host.stop()
        await database.drop()
    }
}
