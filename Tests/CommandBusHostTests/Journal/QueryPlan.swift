@testable import CommandBusSQLite

extension SQLiteDatabase {
    /// The steps SQLite's planner gives for `sql` (`EXPLAIN QUERY PLAN`), one line each, such as
    /// `SEARCH c USING INDEX commands_correlation (correlation_id=?)` or `SCAN commands`: for
    /// tests that a statement reads through an index rather than the whole table.
    func planSteps(of sql: String) throws -> [String] {
        let plan = try prepare("EXPLAIN QUERY PLAN " + sql)
        var steps: [String] = []
        while try plan.step() { steps.append(plan.string(3) ?? "") }
        return steps
    }
}
