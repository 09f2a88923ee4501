#!/usr/bin/env python3
"""The redaction catalog is data (redact-rules/NN-<family>.rules); this turns it
into the C table the engine compiles (Sources/CBridge/redact_catalog.c), the
Swift list of per-rule examples the tests run
(Tests/BridgeCoreTests/RedactRuleExamples.swift) and the redaction fuzzer's
dictionary (every keyword, Tests/fuzz/redact/redact.dict). The outputs are
committed; `--check` exits 1 when one differs from what the rules say (a test
runs it).

Format (one rule per block, see docs/security.md "Adding a rule"):
    define NAME = <regex text>      usable as %NAME% in later patterns
    rule <id>
    description: <one line>
    pattern: <PCRE2, anchored at the keyword minus `back`>
    pattern+: <appended to the pattern, for long ones>
    keywords: <k1> <k2> ...         literals, 2-32 bytes, \\x20 is a space
    back: <bytes the match starts before the keyword>   (default 0)
    gate: none|placeholder|password|random|prose|literal (default none)
    flags: boundary case assign call quoted verb glued paren compare (default none)
    entropy: <bits/byte the secret needs at least>      (default 0)
    positive: <text with the secret between « and »>   (one or more)
    negative: <text the whole catalog must leave alone> (one or more)
Examples may use {{alnum:36}} (alphabets: alnum upper lower digits hex HEX b32
b64 b64url upalnum lowalnum), {{uuid}}, and the escapes \\n \\t \\r \\\\.
"""
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RULES = os.path.join(ROOT, "redact-rules")
C_OUT = os.path.join(ROOT, "Sources/CBridge/redact_catalog.c")
SWIFT_OUT = os.path.join(ROOT, "Tests/BridgeCoreTests/RedactRuleExamples.swift")
DICT_OUT = os.path.join(ROOT, "Tests/fuzz/redact/redact.dict")
# Besides the keywords: the shapes around them (ends of blocks, assignments,
# references, escapes) the fuzzer should combine them with.
DICT_EXTRA = ["-----END PRIVATE KEY-----", "@", "Authorization: Bearer ", "password=", "API_KEY=", "token: ",
              '"secret": "', "--password ", "-u ", ";Password=", "\\n", "${", "<your-key>"]
GATES = {"none": "CB_GATE_NONE", "placeholder": "CB_GATE_PLACEHOLDER", "password": "CB_GATE_PASSWORD",
         "random": "CB_GATE_RANDOM", "prose": "CB_GATE_PROSE", "literal": "CB_GATE_LITERAL"}
FLAGS = {"boundary": "CB_TRIG_BOUNDARY", "case": "CB_TRIG_CASE", "assign": "CB_TRIG_ASSIGN", "call": "CB_TRIG_CALL",
         "quoted": "CB_TRIG_QUOTED", "verb": "CB_TRIG_VERB", "glued": "CB_TRIG_GLUED",
         "paren": "CB_TRIG_PAREN", "compare": "CB_TRIG_COMPARE"}
ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")


def fail(where, msg):
    sys.exit(f"{where}: {msg}")


def parse():
    defines, rules, seen = {}, [], set()
    files = sorted(glob.glob(os.path.join(RULES, "*.rules")))
    if not files:
        fail(RULES, "no *.rules files")
    for path in files:
        family = re.sub(r"^\d+-", "", os.path.basename(path)[:-6])
        cur = None
        for n, raw in enumerate(open(path, encoding="utf-8"), 1):
            where = f"{os.path.relpath(path, ROOT)}:{n}"
            line = raw.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if line.startswith("define "):
                name, _, value = line[7:].partition(" = ")
                defines[name.strip()] = expand(value, defines, where)
                continue
            if line.startswith("rule "):
                rid = line[5:].strip()
                if not ID.match(rid) or rid in seen:
                    fail(where, f"rule id {rid!r} invalid or duplicate")
                seen.add(rid)
                cur = {"id": rid, "family": family, "where": where, "pattern": "", "keywords": [], "back": 0,
                       "gate": "none", "flags": [], "entropy": 0.0, "positive": [], "negative": [], "description": ""}
                rules.append(cur)
                continue
            key, sep, value = line.partition(": ")
            if not sep or cur is None:
                fail(where, "expected 'rule <id>' or 'key: value'")
            set_field(cur, key.strip(), value, defines, where)
    for r in rules:
        check(r)
    return rules


def expand(value, defines, where):
    def sub(m):
        if m.group(1) not in defines:
            fail(where, f"undefined %{m.group(1)}%")
        return defines[m.group(1)]
    return re.sub(r"%([A-Z_][A-Z0-9_]*)%", sub, value)


def set_field(r, key, value, defines, where):
    if key in ("pattern", "pattern+"):
        r["pattern"] += expand(value, defines, where)
    elif key == "description":
        r["description"] = value
    elif key == "keywords":
        r["keywords"] = [k.replace("\\x20", " ") for k in value.split()]
    elif key == "back":
        r["back"] = int(value)
    elif key == "gate":
        if value not in GATES:
            fail(where, f"gate {value!r}")
        r["gate"] = value
    elif key == "flags":
        r["flags"] = value.split()
        if any(f not in FLAGS for f in r["flags"]):
            fail(where, f"flags {value!r}")
    elif key == "entropy":
        r["entropy"] = float(value)
    elif key in ("positive", "negative"):
        r[key].append(value)
    else:
        fail(where, f"unknown key {key!r}")


def check(r):
    w = r["where"]
    if not r["pattern"] or not r["description"]:
        fail(w, "a rule needs a description and a pattern")
    if not 1 <= len(r["keywords"]) <= 8 or any(not 2 <= len(k.encode()) <= 32 for k in r["keywords"]):
        fail(w, "1-8 keywords of 2-32 bytes")
    if not r["positive"] or not r["negative"]:
        fail(w, "every rule needs positive and negative examples")
    for p in r["positive"]:
        if p.count("«") != 1 or p.count("»") != 1 or p.index("«") > p.index("»"):
            fail(w, f"positive example needs one «secret»: {p}")


def c_str(s):
    out = []
    for b in s.encode("utf-8"):
        c = chr(b)
        if c == "\\": out.append("\\\\")
        elif c == '"': out.append('\\"')
        elif c == "?": out.append("\\?")  # never a trigraph
        elif 0x20 <= b < 0x7f: out.append(c)
        else: out.append("\\%03o" % b)
    return '"' + "".join(out) + '"'


def swift_str(s):
    out = []
    for ch in s:
        if ch == "\\": out.append("\\\\")
        elif ch == '"': out.append('\\"')
        elif ord(ch) < 0x20 or ch == "\x7f": out.append("\\u{%x}" % ord(ch))
        else: out.append(ch)
    return '"' + "".join(out) + '"'


def render_c(rules):
    lines = ["/* Generated by scripts/embed-redact-rules.py from redact-rules/<family>.rules. Do not edit:",
             " * change the rules there and run the script (a test fails when this is stale). */",
             '#include "redact_internal.h"', "", "const cb_redact_rule_def cb_redact_catalog[] = {"]
    for r in rules:
        flags = " | ".join(FLAGS[f] for f in r["flags"]) or "0"
        kws = ", ".join(c_str(k) for k in r["keywords"])
        lines.append(f"    {{{c_str(r['id'])}, {c_str(r['family'])}, {c_str(r['description'])},")
        lines.append(f"     {c_str(r['pattern'])},")
        lines.append(f"     {{{kws}}}, {r['back']}, {GATES[r['gate']]}, {flags}, {r['entropy']:.2f}}},")
    lines += ["};", "", "const size_t cb_redact_catalog_count = sizeof cb_redact_catalog / sizeof cb_redact_catalog[0];", ""]
    return "\n".join(lines)


def render_swift(rules):
    lines = ["// Generated by scripts/embed-redact-rules.py from redact-rules/<family>.rules. Do not edit.",
             "// Each rule's examples: a positive's secret sits between « and », templates",
             "// such as {{alnum:36}} are filled in by the tests (RedactRuleExampleTests).", "",
             "let redactRuleExamples: [(id: String, positive: [String], negative: [String])] = ["]
    for r in rules:
        pos = ", ".join(swift_str(p) for p in r["positive"])
        neg = ", ".join(swift_str(p) for p in r["negative"])
        lines.append(f"    ({swift_str(r['id'])}, [{pos}],")
        lines.append(f"     [{neg}]),")
    lines += ["]", ""]
    return "\n".join(lines)


def render_dict(rules):
    words = []
    for k in [k for r in rules for k in r["keywords"]] + DICT_EXTRA:
        if k not in words:
            words.append(k)
    out = ["# Generated by scripts/embed-redact-rules.py from redact-rules/<family>.rules. Do not edit."]
    for w in words:
        out.append('"' + "".join("\\x%02x" % b if b < 0x20 or b >= 0x7f or b in (0x22, 0x5c) else chr(b)
                                 for b in w.encode("utf-8")) + '"')
    return "\n".join(out) + "\n"


def main():
    rules = parse()
    stale = []
    for path, text in ((C_OUT, render_c(rules)), (SWIFT_OUT, render_swift(rules)), (DICT_OUT, render_dict(rules))):
        try:
            same = open(path, encoding="utf-8").read() == text
        except FileNotFoundError:
            same = False
        if same:
            continue
        if "--check" in sys.argv:
            stale.append(os.path.relpath(path, ROOT))
        else:
            open(path, "w", encoding="utf-8").write(text)
    if stale:
        sys.exit("stale (run scripts/embed-redact-rules.py): " + ", ".join(stale))


if __name__ == "__main__":
    main()
