import CommandBus
import CommandBusSQLite
import Foundation
import Testing

/// Values bound to a statement arrive in SQLite as themselves: text from a string's own bytes
/// (no C-string copy in between), an empty string as empty text and never as NULL.
struct SQLiteBindingTests {
    @Test(arguments: ["", "plain", "naïve ✓ 日本", "nul\u{0}inside", String(repeating: "long ", count: 400)])
    func aBoundStringComesBackAsTheSameText(_ text: String) throws {
        try withStatement("SELECT typeof(?1), length(CAST(?1 AS BLOB)), ?1") { statement throws in
            statement.bind(1, text)
            #expect(try statement.step())
            #expect(statement.string(0) == "text")
            #expect(statement.int64(1) == Int64(text.utf8.count))
            #expect(statement.isNull(2) == false)
            // Read back by the column's length: a NUL inside does not end it.
            #expect(statement.string(2) == text)
        }
    }

    @Test func aStateIsReadFromItsNameAndNothingElse() throws {
        try withStatement("SELECT ?1") { statement throws in
            for state in CommandState.allCases {
                statement.bind(1, state.rawValue)
                #expect(try statement.step())
                #expect(statement.state(0) == state)
                statement.reset()
            }
            for text in ["", "s", "Succeeded", "succeededx", "succeede", "timedout", "failed\u{0}", "pending ", "cancel"] {
                statement.bind(1, text)
                #expect(try statement.step())
                #expect(statement.state(0) == nil, "read \(text) as a state")
                statement.reset()
            }
            statement.bind(1, nil as String?)
            #expect(try statement.step())
            #expect(statement.state(0) == nil)
        }
    }

    @Test func aNilStringIsNull() throws {
        try withStatement("SELECT typeof(?1)") { statement throws in
            statement.bind(1, nil as String?)
            #expect(try statement.step())
            #expect(statement.string(0) == "null")
        }
    }

    /// Runs `body` with `sql` prepared on a database in a scratch directory of its own.
    private func withStatement(_ sql: String, _ body: (SQLiteStatement) throws -> Void) throws {
        let scratch = try TemporaryDirectory("sqlite-binding")
        defer { scratch.remove() }
        let database = try SQLiteDatabase(path: scratch.file("b.sqlite").path, create: true)
        defer { database.close() }
        try body(try database.prepare(sql))
    }
}
