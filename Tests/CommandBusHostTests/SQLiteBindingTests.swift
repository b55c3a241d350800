import CommandBusSQLite
import Foundation
import Testing

/// Values bound to a statement arrive in SQLite as themselves: text from a string's own bytes
/// (no C-string copy in between), an empty string as empty text and never as NULL.
struct SQLiteBindingTests {
    @Test(arguments: ["", "plain", "naïve ✓ 日本", "nul\u{0}inside", String(repeating: "long ", count: 400)])
    func aBoundStringComesBackAsTheSameText(_ text: String) throws {
        let scratch = try TemporaryDirectory("sqlite-binding")
        defer { scratch.remove() }
        let database = try SQLiteDatabase(path: scratch.file("b.sqlite").path, create: true)
        defer { database.close() }
        let statement = try database.prepare("SELECT typeof(?1), length(CAST(?1 AS BLOB)), ?1")
        statement.bind(1, text)
        #expect(try statement.step())
        #expect(statement.string(0) == "text")
        #expect(statement.int64(1) == Int64(text.utf8.count))
        #expect(statement.isNull(2) == false)
    }

    @Test func aNilStringIsNull() throws {
        let scratch = try TemporaryDirectory("sqlite-binding")
        defer { scratch.remove() }
        let database = try SQLiteDatabase(path: scratch.file("b.sqlite").path, create: true)
        defer { database.close() }
        let statement = try database.prepare("SELECT typeof(?1)")
        statement.bind(1, nil as String?)
        #expect(try statement.step())
        #expect(statement.string(0) == "null")
    }
}
