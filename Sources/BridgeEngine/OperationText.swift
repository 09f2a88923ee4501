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

    public static func key(forCommand command: String) -> String {
        // Each `&&`/`;`/`|` part is checked; the most significant kind wins.
        let words = command.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).map(String.init)
        func has(_ seqs: [[String]]) -> Bool {
            for seq in seqs where words.count >= seq.count {
                for start in 0...(words.count - seq.count) {
                    // A sequence starts a command: at the beginning or after a separator or env/sudo.
                    let atStart = start == 0 || ["&&", "||", ";", "|", "sudo", "npx", "time"].contains(words[start - 1])
                        || words[start - 1].contains("=")
                    if atStart, Array(words[start..<start + seq.count]) == seq { return true }
                }
            }
            return false
        }
        if has(testWords) { return "operation.running_tests" }
        if has(installWords) { return "operation.installing" }
        if has(lintWords) { return "operation.linting" }
        if has(buildWords) { return "operation.building" }
        if words.first == "git" { return "operation.git" }
        return "operation.running_command"
    }
}
