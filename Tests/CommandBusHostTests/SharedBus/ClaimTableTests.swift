@testable import CommandBusPostgres
import Foundation
import Testing

/// The bus host's table of claims, found by claim and by command id.
@Suite struct ClaimTableTests {
    let command = UUID()
    let other = UUID()

    @Test func aCommandIdFindsEveryClaimOfItsCommandAndNoOther() {
        var table = ClaimTable<String>()
        table[BusHost.Claim(id: command, attempt: 1)] = "first"
        table[BusHost.Claim(id: command, attempt: 2)] = "second"
        table[BusHost.Claim(id: other, attempt: 1)] = "other"
        #expect(table.values(of: command).sorted() == ["first", "second"])
        #expect(table.values(of: other) == ["other"])
        #expect(table.values(of: UUID()).isEmpty)
        #expect(table.claims.count == 3)
        #expect(table.values.sorted() == ["first", "other", "second"])
    }

    @Test func removingAnyClaimOfACommandTakesEachOnceThenNothing() {
        var table = ClaimTable<String>()
        table[BusHost.Claim(id: command, attempt: 1)] = "first"
        table[BusHost.Claim(id: command, attempt: 2)] = "second"
        table[BusHost.Claim(id: other, attempt: 1)] = "other"
        let taken = [table.removeAny(of: command), table.removeAny(of: command)].compactMap { $0 }
        #expect(taken.sorted() == ["first", "second"])
        #expect(table.removeAny(of: command) == nil)
        #expect(table.values == ["other"])
    }

    @Test func aClaimIsTakenByItsOwnAttemptOnly() {
        var table = ClaimTable<String>()
        table[BusHost.Claim(id: command, attempt: 1)] = "first"
        #expect(table.remove(BusHost.Claim(id: command, attempt: 2)) == nil)
        #expect(table[BusHost.Claim(id: command, attempt: 1)] == "first")
        table[BusHost.Claim(id: command, attempt: 1)] = nil
        #expect(table.remove(BusHost.Claim(id: command, attempt: 1)) == nil)
        #expect(table.claims.isEmpty)
    }
}
