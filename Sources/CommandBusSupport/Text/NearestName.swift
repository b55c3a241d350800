/// The name among `names` nearest `name`, for a "did you mean" hint: at most two edits away
/// (Levenshtein distance), not `name` itself, the nearest if several are; `nil` if none is.
package func nearestName(to name: String, among names: [String]) -> String? {
    let target = Array(name)
    return names.filter { $0 != name }
        .map { ($0, editDistance(target, Array($0))) }
        .filter { $0.1 <= 2 }
        .min { $0.1 < $1.1 }?.0
}

/// How many single-character insertions, deletions and substitutions turn `a` into `b`.
private func editDistance(_ a: [Character], _ b: [Character]) -> Int {
    var previous = Array(0...b.count)
    for (i, x) in a.enumerated() {
        var current = [i + 1] + Array(repeating: 0, count: b.count)
        for (j, y) in b.enumerated() {
            current[j + 1] = min(previous[j + 1] + 1, current[j] + 1, previous[j] + (x == y ? 0 : 1))
        }
        previous = current
    }
    return previous[b.count]
}
