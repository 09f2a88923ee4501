import ArgumentParser

/// Every number an option takes has a range; outside it the command stops
/// before doing anything, naming the option, the value and the range. Numeric
/// options parse their value unconditionally, so "-1" is a value out of range
/// and not a missing one.
enum OptionRange {
    /// `value` in `(lower, upper]`, or `[lower, upper]` with `closedBelow`.
    static func check(_ option: String, _ value: Double, _ lower: Double, _ upper: Double,
                      closedBelow: Bool = false, unit: String) throws {
        let above = closedBelow ? value >= lower : value > lower
        guard !(value.isFinite && above && value <= upper) else { return }
        throw ValidationError("\(option) \(text(value)) is out of range: \(unit) in "
                              + "\(closedBelow ? "[" : "(")\(text(lower)), \(text(upper))]")
    }

    static func check(_ option: String, _ value: Int, _ range: ClosedRange<Int>, unit: String) throws {
        guard !range.contains(value) else { return }
        throw ValidationError("\(option) \(value) is out of range: \(unit) in [\(range.lowerBound), \(range.upperBound)]")
    }

    private static func text(_ v: Double) -> String {
        v.isFinite && v.rounded() == v && abs(v) < 1e15 ? String(Int64(v)) : "\(v)"
    }
}
