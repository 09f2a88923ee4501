/// Operation text from tool use: "Running tests", "Building project",
/// "Editing files", "Reading code" (OVERVIEW "Lock Screen: Current operation").
/// Returns a localization key; never raw command text, so it is safe on the
/// lock screen whatever `showNotificationDetails` says.
public enum OperationText {
    public static func key(for tool: ToolUse) -> String {
        switch tool.name {
        case "Bash", "BashOutput", "Shell":
            return tool.command.map(key(forCommand:)) ?? "operation.running_command"
        case "Edit", "MultiEdit", "Write", "NotebookEdit":
            return "operation.editing"
        case "Read", "Grep", "Glob", "LS", "NotebookRead":
            return "operation.reading"
        case "WebFetch", "WebSearch":
            return "operation.searching_web"
        case "Task", "Agent":
            return "operation.subtask"
        case "TodoWrite":
            return "operation.planning"
        default:
            return "operation.working"
        }
    }

    // Matched against whole words of the command, first matching rule wins;
    // tests before builds because `npm run build && npm test` runs the tests last
    // and "swift test" also builds.
    private static let testWords: [[String]] = [
        ["npm", "test"], ["npm", "run", "test"], ["yarn", "test"], ["pnpm", "test"], ["bun", "test"],
        ["pytest"], ["go", "test"], ["cargo", "test"], ["swift", "test"], ["jest"], ["vitest"],
        ["make", "test"], ["make", "check"], ["rspec"], ["mvn", "test"], ["gradle", "test"], ["./gradlew", "test"],
        ["xcodebuild", "test"], ["ctest"], ["phpunit"], ["mix", "test"], ["dotnet", "test"], ["tox"],
        ["python", "-m", "pytest"], ["python3", "-m", "pytest"], ["python", "-m", "unittest"],
    ]
    private static let buildWords: [[String]] = [
        ["npm", "run", "build"], ["yarn", "build"], ["pnpm", "build"], ["cargo", "build"], ["swift", "build"],
        ["go", "build"], ["xcodebuild"], ["tsc"], ["gradle", "build"], ["./gradlew", "build"], ["mvn", "package"],
        ["mvn", "compile"], ["cmake"], ["make"], ["ninja"], ["dotnet", "build"], ["webpack"], ["vite", "build"],
    ]
    private static let installWords: [[String]] = [
        ["npm", "install"], ["npm", "ci"], ["npm", "i"], ["yarn", "add"], ["yarn", "install"], ["pnpm", "install"],
        ["pip", "install"], ["pip3", "install"], ["brew", "install"], ["apt-get", "install"], ["apt", "install"],
        ["cargo", "add"], ["go", "get"], ["bundle", "install"], ["pod", "install"], ["swift", "package", "resolve"],
    ]
    private static let lintWords: [[String]] = [
        ["eslint"], ["swiftlint"], ["ruff"], ["flake8"], ["prettier"], ["npm", "run", "lint"], ["cargo", "clippy"],
        ["golangci-lint"], ["rubocop"], ["swift-format"],
    ]

    /// Words that may precede a command inside one shell line.
    private static let prefixes: Set<Substring> = ["&&", "||", ";", "|", "sudo", "npx", "time", "exec", "env"]

    public static func key(forCommand command: String) -> String {
        // Each `&&`/`;`/`|` part is checked; the most significant kind wins.
        let words = command.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" })
        // Indexes where a command starts: the beginning, after a separator or
        // a prefix word, or after VAR=value assignments.
        var starts: [Int] = []
        for i in words.indices where i == 0 || prefixes.contains(words[i - 1]) || words[i - 1].contains("=") {
            starts.append(i)
        }
        func has(_ seqs: [[String]]) -> Bool {
            for start in starts {
                for seq in seqs where start + seq.count <= words.count {
                    var k = 0
                    while k < seq.count && words[start + k] == seq[k] { k += 1 }
                    if k == seq.count { return true }
                }
            }
            return false
        }
        if has(testWords) { return "operation.running_tests" }
        if has(installWords) { return "operation.installing" }
        if has(lintWords) { return "operation.linting" }
        if has(buildWords) { return "operation.building" }
        if starts.contains(where: { words[$0] == "git" }) { return "operation.git" }
        return "operation.running_command"
    }
}
