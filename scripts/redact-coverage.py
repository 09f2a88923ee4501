#!/usr/bin/env python3
"""Coverage of the redaction catalog against the formats other rule sets document.

For every rule of gitleaks (config/gitleaks.toml), Kingfisher (data/rules/*.yml), Nosey
Parker (crates/noseyparker/data/default/builtin/rules/*.yml) and TruffleHog (pkg/detectors/*/*.go: each detector's secret pattern, keyPat/secretPat/...)
this builds SYNTHETIC secrets from the rule's format (prefix, alphabet, length read
from its pattern's secret group; random characters from a fixed seed), places them
in the context the rule's keyword implies (`NAME_API_KEY=<secret>`, and bare in a log
line when the format has its own prefix), redacts each one on its own (the RPC
`redact` method of `codingbridge serve --ephemeral`) and reports recall per source and
the misses grouped by rule.
Benign look-alikes (the same alphabets without the prefix, UUIDs, hashes) measure
false positives. Nothing of the other projects is copied: their patterns are only
parsed for the format facts; values and contexts are generated here.

  scripts/redact-coverage.py [--gitleaks DIR] [--kingfisher DIR] [--noseyparker DIR] [--trufflehog DIR]
      [--bin PATH] [-v]
      [--all-contexts] [--with-optional] [--examples]
  scripts/redact-coverage.py ... --write-corpus Tests/redact-corpus/heldout-rulesets.txt \
      --write-benign Tests/redact-corpus/heldout-benign-rulesets.txt
      (writes the generated cases as templates, {{alnum:32}} etc., one or two per rule)

DIR is a git directory (read at HEAD with `git show`) or a checkout.
"""
import argparse
import json
import os
import re
import subprocess
import tomllib
from re import _parser as sre  # the stdlib's own regex parser: a parse tree to walk
from re import _constants as C

import yaml

ALPHABETS = {  # the names Tests/BridgeCoreTests/RedactCatalogTests.swift expands
    "hex": "0123456789abcdef", "HEX": "0123456789ABCDEF", "digits": "0123456789",
    "upper": "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "lower": "abcdefghijklmnopqrstuvwxyz",
}
ALPHABETS["alnum"] = ALPHABETS["upper"] + ALPHABETS["lower"] + ALPHABETS["digits"]
ALPHABETS["upalnum"] = ALPHABETS["upper"] + ALPHABETS["digits"]
ALPHABETS["lowalnum"] = ALPHABETS["lower"] + ALPHABETS["digits"]
ALPHABETS["b32"] = ALPHABETS["upper"] + "234567"
ALPHABETS["lowb32"] = ALPHABETS["lower"] + "234567"
ALPHABETS["b64"] = ALPHABETS["alnum"] + "+/"
ALPHABETS["b64url"] = ALPHABETS["alnum"] + "-_"
# Largest first: a class gets the largest named alphabet it contains.
BY_SIZE = sorted(ALPHABETS, key=lambda k: -len(ALPHABETS[k]))
ALPHABETS["bcrypt"] = "./" + ALPHABETS["alnum"]  # the corpus templates' crypt alphabet; never generated
PRINTABLE = [chr(c) for c in range(33, 127)]
# How many times an optional part ("x?") is generated: 0 by default, so a format is
# read at its shortest; --with-optional makes it 1 (checksums, suffixes, tails).
OPTIONAL = 0


# ---------------------------------------------------------------- deterministic fill-in
class SplitMix:
    """The tests' generator (Fake.SplitMix), so a template expands the same here and there."""
    M = (1 << 64) - 1

    def __init__(self, seed_text=None, state=0):
        if seed_text is not None:
            h = 0xCBF29CE484222325
            for b in seed_text.encode():
                h = ((h ^ b) * 0x100000001B3) & self.M
            state = h
        self.state = state

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & self.M
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & self.M
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & self.M
        return z ^ (z >> 31)

    def s(self, alphabet, n):
        need_d = any(c.isdigit() for c in alphabet)
        need_l = any(c.isalpha() for c in alphabet)
        while True:
            out = "".join(alphabet[self.next() % len(alphabet)] for _ in range(n))
            if n < 8 or ((not need_d or any(c.isdigit() for c in out)) and
                         (not need_l or any(c.isalpha() for c in out))):
                return out

    def uuid(self):
        h = ALPHABETS["hex"]
        return f"{self.s(h, 8)}-{self.s(h, 4)}-4{self.s(h, 3)}-a{self.s(h, 3)}-{self.s(h, 12)}"


def expand(template):
    """Fake.expand: escapes decoded, {{uuid}} and {{<alphabet>:<n>}} filled in."""
    g = SplitMix(template)
    out, i = [], 0
    while i < len(template):
        if template[i] == "\\" and i + 1 < len(template) and template[i + 1] in "ntr\\":
            out.append({"n": "\n", "t": "\t", "r": "\r", "\\": "\\"}[template[i + 1]])
            i += 2
            continue
        if template.startswith("{{uuid}}", i):
            out.append(g.uuid())
            i += 8
            continue
        m = re.match(r"\{\{(\w+):(\d+)\}\}", template[i:])
        if m and m.group(1) in ALPHABETS:
            out.append(g.s(ALPHABETS[m.group(1)], int(m.group(2))))
            i += m.end()
            continue
        out.append(template[i])
        i += 1
    return "".join(out)


# ---------------------------------------------------------------- rule sets
def read_tree(src, path_glob):
    """{path: text} for files under src matching path_glob (a prefix + suffix)."""
    prefix, suffix = path_glob
    files = {}
    if os.path.isdir(os.path.join(src, "objects")) or src.endswith(".git") or os.path.isfile(os.path.join(src, "HEAD")):
        names = subprocess.run(["git", "--git-dir", src, "ls-tree", "-r", "--name-only", "HEAD"],
                               capture_output=True, text=True, check=True).stdout.split()
        for n in names:
            if n.startswith(prefix) and n.endswith(suffix):
                files[n] = subprocess.run(["git", "--git-dir", src, "show", f"HEAD:{n}"],
                                          capture_output=True, text=True, check=True).stdout
    else:
        for root, _, fs in os.walk(os.path.join(src, prefix)):
            for f in fs:
                p = os.path.join(root, f)
                if p.endswith(suffix):
                    files[os.path.relpath(p, src)] = open(p, encoding="utf-8").read()
    return files


def gitleaks_rules(src):
    text = read_tree(src, ("config/gitleaks.toml", "gitleaks.toml"))
    cfg = tomllib.loads(next(iter(text.values())))
    for r in cfg.get("rules", []):
        if "regex" not in r:
            continue  # path-only rules
        yield {"source": "gitleaks", "id": r["id"], "name": r.get("description", ""), "pattern": r["regex"],
               "group": r.get("secretGroup"), "keywords": r.get("keywords", [])}


def yaml_rules(src, source, prefix):
    """Kingfisher's and Nosey Parker's rule files (one YAML format: Kingfisher began as
    a fork of Nosey Parker's rules)."""
    for path, text in sorted(read_tree(src, (prefix, ".yml")).items()):
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError:
            continue
        for r in (doc or {}).get("rules", []):
            if "pattern" not in r or r.get("visible") is False:
                continue  # invisible rules find ids and hosts that a secret rule depends on
            stem = os.path.basename(path)[:-4]
            yield {"source": source, "id": r.get("id", stem), "name": r.get("name", ""),
                   "pattern": r["pattern"], "group": None, "keywords": [stem],
                   "examples": [e for e in r.get("examples") or [] if isinstance(e, str)]}


def kingfisher_rules(src):
    return yaml_rules(src, "kingfisher", "data/rules/")


def noseyparker_rules(src):
    return yaml_rules(src, "noseyparker", "crates/noseyparker/data/default/builtin/rules/")


SECRET_VAR = re.compile(r"(?i)(key|secret|token|pass|pat$|pwd|auth|cred)")
NOT_SECRET_VAR = re.compile(r"(?i)(id|url|uri|domain|host|email|user|region|name|endpoint|org|tenant|account|server|"
                            r"instance|subdomain|workspace|project|zone|app$|base|site)")


def trufflehog_rules(src):
    """Each detector's secret patterns: `xPat = regexp.MustCompile(detectors.PrefixRegex([]string{"kw"}) + `...`)`
    whose variable names a secret (keyPat, tokenPat; not idPat, urlPat, domainPat)."""
    for path, text in sorted(read_tree(src, ("pkg/detectors/", ".go")).items()):
        if path.endswith("_test.go") or "MustCompile" not in text:
            continue
        det = path.split("/")[2]
        kws = re.search(r"Keywords\(\) \[\]string \{\s*return \[\]string\{([^}]*)\}", text)
        keywords = re.findall(r'"([^"]+)"', kws.group(1)) if kws else [det]
        for m in re.finditer(r"(\w+)\s*=\s*regexp\.MustCompile\(([^\n]*)\)\s*$", text, re.M):
            var, expr = m.group(1), m.group(2)
            if not SECRET_VAR.search(var) or NOT_SECRET_VAR.search(var.replace("Pat", "")):
                continue
            prefix = re.search(r'PrefixRegex\(\[\]string\{([^}]*)\}\)', expr)
            words = re.findall(r'"([^"]+)"', prefix.group(1)) if prefix else []
            lits = re.findall(r"`([^`]*)`", expr)
            if not lits:
                continue
            yield {"source": "trufflehog", "id": f"{det}.{var}", "name": det + " " + re.sub(r"Pat$", "", var),
                   "pattern": "".join(lits), "group": None, "keywords": words or keywords}


# ---------------------------------------------------------------- pattern -> template
POSIX = {"alnum": "a-zA-Z0-9", "alpha": "a-zA-Z", "digit": "0-9", "upper": "A-Z", "lower": "a-z",
         "xdigit": "0-9a-fA-F", "word": r"\w", "punct": r"!-/:-@\[-`{-~", "space": r"\s"}


def to_python(pattern):
    """Rust/Go regex syntax -> Python's, enough to read the format; flags returned apart."""
    flags = 0
    for m in re.finditer(r"\(\?([imsxU-]+)\)", pattern):
        if "x" in m.group(1).split("-")[0]:
            flags |= re.X
        if "i" in m.group(1).split("-")[0]:
            flags |= re.I
    p = re.sub(r"\(\?[imsxU-]+\)", "", pattern)
    p = re.sub(r"\(\?([imsxU-]+):", "(?:", p)
    p = re.sub(r"\[\[:(\w+):\]\]", lambda m: "[" + POSIX.get(m.group(1), "a-z") + "]", p)
    p = re.sub(r"\[:(\w+):\]", lambda m: POSIX.get(m.group(1), "a-z"), p)
    p = re.sub(r"\\[pP]\{?\w+\}?", r"\\w", p).replace(r"\z", r"\Z").replace("(?P<", "(?P<")
    p = p.replace("(?<", "(?P<").replace("(?P<=", "(?<=").replace("(?P<!", "(?<!")
    return p, flags


CATEGORY_RE = {C.CATEGORY_DIGIT: r"\d", C.CATEGORY_NOT_DIGIT: r"\D", C.CATEGORY_WORD: r"\w",
               C.CATEGORY_NOT_WORD: r"\W", C.CATEGORY_SPACE: r"\s", C.CATEGORY_NOT_SPACE: r"\S"}


def class_set(items):
    chars, neg = set(), False
    universe = PRINTABLE + [" "]
    for op, av in items:
        if op is C.NEGATE:
            neg = True
        elif op is C.LITERAL:
            chars.add(chr(av))
        elif op is C.RANGE:
            chars.update(chr(c) for c in range(av[0], av[1] + 1) if c < 128)
        elif op is C.CATEGORY:
            chars.update(c for c in universe if re.match(CATEGORY_RE.get(av, r"\w"), c))
    if neg:
        chars = set(universe) - chars
    return chars


def class_piece(chars, rng):
    """A named alphabet inside the class, else one literal character of it."""
    for name in BY_SIZE:
        if set(ALPHABETS[name]) <= chars:
            return ("alpha", name)
    pick = sorted(c for c in chars if c.isalnum()) or sorted(c for c in chars if not c.isspace()) or [" "]
    return ("lit", pick[rng.next() % len(pick)])


class Gen:
    """Walks a parse tree, emitting template pieces: literal text or (alphabet, n)."""

    def __init__(self, rng):
        self.rng, self.out = rng, []

    def emit_lit(self, s):
        if self.out and self.out[-1][0] == "lit":
            self.out[-1] = ("lit", self.out[-1][1] + s)
        else:
            self.out.append(("lit", s))

    def emit_run(self, name, n):
        if n <= 0:
            return
        if self.out and self.out[-1][0] == "run" and self.out[-1][1] == name:
            self.out[-1] = ("run", name, self.out[-1][2] + n)
        else:
            self.out.append(("run", name, n))

    def atom(self, op, av, n=1):
        """A single-character node repeated n times; False when not single-character."""
        if op is C.LITERAL:
            self.emit_lit(chr(av) * n)
        elif op is C.ANY:  # a lone "." is a dot in a host name (hooks.slack.com) more often than not
            self.emit_run("alnum", n) if n > 1 else self.emit_lit(".")
        elif op in (C.IN, C.CATEGORY) or op is C.NOT_LITERAL:
            items = av if op is C.IN else [(C.CATEGORY, av)] if op is C.CATEGORY else [(C.NEGATE, None), (C.LITERAL, av)]
            chars = class_set(items)
            if chars <= set(" \t\r\n"):  # blanks: one space, not twenty
                n = min(n, 1)
            kind = class_piece(chars, self.rng)
            if kind[0] == "alpha":
                self.emit_run(kind[1], n)
            else:
                self.emit_lit(kind[1] * n)
        else:
            return False
        return True

    def count(self, lo, hi, simple):
        if lo == hi:
            return lo
        if hi == C.MAXREPEAT:
            return max(lo, 20 if simple == "wide" else 2) if simple else max(lo, 1)
        if lo == 0 and hi == 1:
            return OPTIONAL
        return (lo + hi + 1) // 2 if simple else max(lo, 1)

    def walk(self, items):
        for op, av in items:
            if op in (C.MAX_REPEAT, C.MIN_REPEAT, getattr(C, "POSSESSIVE_REPEAT", None)):
                lo, hi, sub = av
                sub = list(sub)
                simple = len(sub) == 1 and sub[0][0] in (C.LITERAL, C.ANY, C.IN, C.CATEGORY, C.NOT_LITERAL)
                if simple and sub[0][0] is C.IN and len(class_set(sub[0][1])) > 16:
                    simple = "wide"
                n = self.count(lo, hi, simple)
                if simple:
                    self.atom(sub[0][0], sub[0][1], n)
                else:
                    for _ in range(min(n, 8)):
                        self.walk(sub)
            elif op is C.SUBPATTERN:
                self.walk(av[-1])
            elif op is C.BRANCH:
                alts = av[1]
                self.walk(alts[self.rng.next() % len(alts)])
            elif op in (C.AT, C.ASSERT, C.ASSERT_NOT, C.GROUPREF):
                pass
            elif not self.atom(op, av):
                raise ValueError(f"unsupported node {op}")


def find_group(items, num):
    for op, av in items:
        if op is C.SUBPATTERN and av[0] == num:
            return av[-1]
        subs = []
        if op is C.SUBPATTERN:
            subs = [av[-1]]
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, getattr(C, "POSSESSIVE_REPEAT", None)):
            subs = [av[2]]
        elif op is C.BRANCH:
            subs = av[1]
        elif op in (C.ASSERT, C.ASSERT_NOT):
            subs = [av[1]]
        for s in subs:
            got = find_group(s, num)
            if got is not None:
                return got
    return None


def template_of(pieces):
    out = []
    for p in pieces:
        if p[0] == "lit":
            out.append(p[1].replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r"))
        else:
            out.append("{{%s:%d}}" % (p[1], p[2]))
    return "".join(out)


def secret_template(rule):
    """(template, pieces) of a secret in the rule's format, or raises ValueError."""
    p, flags = to_python(rule["pattern"])
    tree = sre.parse(p, flags)
    groups = tree.state.groups - 1
    num = rule["group"] or (1 if groups >= 1 else 0)
    items = find_group(list(tree), num) if num else list(tree)
    if items is None:
        raise ValueError("no secret group")
    g = Gen(SplitMix(rule["source"] + rule["id"]))
    g.walk(list(items))
    pieces = g.out
    if sum(p[2] for p in pieces if p[0] == "run") < 6:
        raise ValueError("no random part of 6+ characters")
    return template_of(pieces), pieces


# ---------------------------------------------------------------- cases
def snake(text):
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")


def context_words(rule):
    """Literal words (3+ letters) of the pattern outside its secret: the keyword a
    context-dependent format needs next to it (`airtable ... <14 chars>`)."""
    p, _ = to_python(rule["pattern"])
    p = re.sub(r"\\.|\[[^\]]*\]|\{[^}]*\}", " ", p)
    return [w.lower() for w in re.findall(r"[A-Za-z]{3,}", p)
            if w.lower() not in ("xi", "ix", "x", "i", "P") and not w.startswith("P")]


def key_name(rule, words):
    base = snake(rule["id"] if rule["source"] == "gitleaks" else rule["name"]).upper() or "API"
    if words and words[0].upper() not in base:
        base = words[0].upper() + "_" + base
    if not re.search(r"(KEY|TOKEN|SECRET|PASSWORD|PAT|CREDENTIALS?)$", base):
        base += "_KEY"
    return base


def distinctive(pieces):
    first = pieces[0]
    if first[0] == "lit" and len(first[1]) >= 3 and re.search(r"[A-Za-z]", first[1]):
        return True
    return any(p[0] == "lit" and len(p[1]) >= 5 and re.search(r"[A-Za-z]{3}", p[1]) for p in pieces)


CONTEXTS = [
    lambda k, s: f"{k}=«{s}»",
    lambda k, s: f"  {k.lower()}: \"«{s}»\"",
    lambda k, s: f"{{\"{k.lower()}\": \"«{s}»\"}}",
    lambda k, s: f"{k.lower()} = '«{s}»'",
]


def cases_for(rule, index, all_contexts=False):
    """[(template, kind)] for one rule; ValueError when its format can't be generated.
    One key-name syntax per rule (rotating), or all of them with all_contexts."""
    tpl, pieces = secret_template(rule)
    words = context_words(rule) if rule["source"] == "kingfisher" else [w.lower() for w in rule["keywords"]
                                                                          if re.fullmatch(r"[A-Za-z]{3,}", w)] if rule["source"] == "trufflehog" else [
        k.lower() for k in rule["keywords"] if re.fullmatch(r"[A-Za-z]{3,}", k)]
    ctx = CONTEXTS if all_contexts else [CONTEXTS[index % len(CONTEXTS)]]
    out = [(c(key_name(rule, words), tpl), "keyed") for c in ctx]
    if distinctive(pieces):
        out.append((f"2024-05-01T10:00:00Z INFO worker-3 loaded «{tpl}» from cache", "bare"))
    return out


def benign_for(rule):
    """The rule's random parts without its prefix, in a line that names no secret."""
    _, pieces = secret_template(rule)
    runs = [p for p in pieces if p[0] == "run"]
    if not distinctive(pieces) or sum(p[2] for p in runs) < 16:
        return None
    return "INFO blob " + "".join("{{%s:%d}}" % (p[1], p[2]) for p in runs) + " uploaded in 3 parts"


FIXED_BENIGN = [
    "commit {{hex:40}}", "Merge: {{hex:7}} {{hex:7}}", "request_id={{uuid}}", '"id": "{{uuid}}"',
    "sha256:{{hex:64}}", "image: registry.example.com/app@sha256:{{hex:64}}",
    '<script src="https://cdn.example.com/app.js" integrity="sha384-{{b64:64}}"></script>',
    "ETag: \"{{hex:32}}\"", "md5sum: {{hex:32}}  dist/app.tar.gz", "trace_id={{hex:32}} span_id={{hex:16}}",
    "Uploaded {{lowalnum:12}}.png (34 KB)", "session {{uuid}} started", "checksum: sha1:{{hex:40}}",
    "resolved \"https://registry.npmjs.org/left-pad/-/left-pad-1.3.0.tgz#{{hex:40}}\"",
    "go.sum: golang.org/x/net v0.21.0 h1:{{b64:43}}=", "build {{hex:12}} finished in 42s",
]


def run(bin_path, lines):
    """[(text, secret span or None)] -> findings per line. Each case is redacted on its
    own (one `redact` call each over one `serve --ephemeral` process), as the tests do:
    a multi-line rule cannot match across two neighbouring cases."""
    texts = [expand_case(l)[0] for l in lines]
    return texts, run_texts(bin_path, texts)


def run_texts(bin_path, texts):
    reqs = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}]
    reqs += [{"jsonrpc": "2.0", "id": i + 1, "method": "redact", "params": {"text": t}} for i, t in enumerate(texts)]
    data = "".join(json.dumps(r) + "\n" for r in reqs).encode()
    p = subprocess.run([bin_path, "serve", "--ephemeral"], input=data, capture_output=True, check=True)
    hits = [[] for _ in texts]
    for line in p.stdout.decode().splitlines():
        reply = json.loads(line)
        i = reply.get("id", 0) - 1
        if i < 0:
            continue
        if "error" in reply:
            raise SystemExit(f"redact failed for case {i + 1}: {reply['error']}")
        hits[i] = [(f["start"], f["end"], f["ruleId"]) for f in reply["result"]["findings"]]
    return hits


def expand_case(template):
    """Fake.positive: the text and the secret's byte span (None for a benign line)."""
    e = expand(template)
    if "«" not in e:
        return e, None
    a, b = e.index("«"), e.index("»")
    text = e[:a] + e[a + 1:b] + e[b + 1:]
    start = len(e[:a].encode())
    return text, (start, start + len(e[a + 1:b].encode()))


# Rules that find identifiers or public values (client ids, publishable and public keys,
# host names, bucket names, ARNs, account ids, user names, SAS token fields): reported
# apart, not counted as misses.
NOT_A_SECRET = re.compile(r"(?i)client[-_ .]?id|public|publishable|portal|(sip|sv|time)value|\.iadpat|"
                          r"account id|\bbucket|resource name|domain$|app username")


def measure(bin_path, rules, verbose, all_contexts=False):
    cases, skipped = [], []  # (rule, template, kind)
    public = [r for r in rules if NOT_A_SECRET.search(r["id"] + " " + r["name"])]
    rules = [r for r in rules if not NOT_A_SECRET.search(r["id"] + " " + r["name"])]
    print(f"left out as identifiers/public values: {len(public)} rules "
          f"({', '.join(sorted(r['source'] + ':' + r['id'] for r in public))})")
    for i, r in enumerate(rules):
        try:
            cases += [(r, t, k) for t, k in cases_for(r, i, all_contexts)]
        except (ValueError, re.error, RecursionError, OverflowError) as e:
            skipped.append((r, str(e)))
    texts, hits = run(bin_path, [t for _, t, _ in cases])
    caught = []
    for (r, t, k), text, h in zip(cases, texts, hits):
        s, e = expand_case(t)[1]
        caught.append(any(a < e and b > s for a, b, _ in h))
    report = {}
    for (r, t, k), ok, text in zip(cases, caught, texts):
        d = report.setdefault(r["source"], {"rules": {}, "cases": 0, "caught": 0})
        d["cases"] += 1
        d["caught"] += ok
        d["rules"].setdefault(r["id"], []).append((ok, k, text))
    for src, d in report.items():
        total = sum(1 for r in rules if r["source"] == src)
        full = sum(all(ok for ok, _, _ in v) for v in d["rules"].values())
        print(f"{src}: rules covered {full}/{len(d['rules'])} generable ({total} in the set, "
              f"{total - len(d['rules'])} not generable); cases {d['caught']}/{d['cases']} "
              f"recall {d['caught'] / max(d['cases'], 1):.3f}")
    for src, d in report.items():
        for rid, v in sorted(d["rules"].items()):
            for ok, k, text in v:
                if not ok:
                    print(f"  MISS {src} {rid} [{k}]: {text[:160]}")
    if verbose:
        for r, why in skipped:
            print(f"  SKIP {r['source']} {r['id']}: {why}")
    return cases, caught


def measure_examples(bin_path, rules):
    """The rule sets' own example lines (Kingfisher, Nosey Parker; read at run time, never
    written anywhere): is the part the pattern calls the secret redacted? Realistic
    contexts, measured only."""
    for source in sorted({r["source"] for r in rules if r.get("examples")}):
        measure_examples_of(bin_path, source, [r for r in rules if r["source"] == source])


def measure_examples_of(bin_path, source, rules):
    cases = []
    for r in rules:
        if NOT_A_SECRET.search(r["id"] + " " + r["name"]) or not r.get("examples"):
            continue
        try:
            p, flags = to_python(r["pattern"])
            rx = re.compile(p, flags)
        except (re.error, OverflowError):
            continue
        for ex in r["examples"]:
            m = rx.search(ex)
            if m:  # the whole match: which group is the secret differs from rule to rule
                g = 1 if rx.groups >= 1 and m.group(1) else 0
                cases.append((r, ex, len(ex[:m.start()].encode()), len(ex[:m.end()].encode()),
                               entropy(m.group(g))))
    hits = run_texts(bin_path, [c[1] for c in cases])
    missed, random_total, random_missed = [], 0, 0
    for (r, ex, s, e, h), found in zip(cases, hits):
        hit = any(a < e and b > s for a, b, _ in found)
        random_total += h >= 3.5
        random_missed += h >= 3.5 and not hit
        if not hit:
            missed.append((r, ex, h))
    print(f"{source} examples: {len(cases) - len(missed)}/{len(cases)} redacted "
          f"({1 - len(missed) / max(len(cases), 1):.3f}); rules with a miss: {len({m[0]['id'] for m in missed})}; "
          f"secrets with entropy >= 3.5 bits/char: {random_total - random_missed}/{random_total}")
    for r, ex, h in missed:
        print(f"  MISS-EXAMPLE {r['id']} (H={h:.2f}): {ex[:160]!r}")


def entropy(s):
    import math
    n = len(s) or 1
    return -sum(c / n * math.log2(c / n) for c in (s.count(ch) for ch in set(s)))


def measure_benign(bin_path, rules):
    lines = sorted({b for r in rules for b in [safe(benign_for, r)] if b}) + FIXED_BENIGN
    texts, hits = run(bin_path, lines)
    bad = [(t, h) for t, h in zip(texts, hits) if h]
    print(f"benign look-alikes: false positives {len(bad)}/{len(lines)} = {len(bad) / len(lines):.3f}")
    for t, h in bad:
        print(f"  FP {h[0][2]}: {t[:160]}")
    return lines


def safe(f, r):
    try:
        return f(r)
    except (ValueError, re.error, RecursionError, OverflowError):
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gitleaks", default="/work/.mirror/gitleaks+gitleaks/repo")
    ap.add_argument("--kingfisher", default="/work/.mirror/mongodb+kingfisher/repo")
    ap.add_argument("--noseyparker", default="/work/.mirror/praetorian-inc+noseyparker/repo")
    ap.add_argument("--trufflehog", default="/work/.mirror/trufflesecurity+trufflehog/repo")
    ap.add_argument("--bin", default=None, help="codingbridge binary (default: the release build)")
    ap.add_argument("--write-corpus", help="write the secret cases as templates to this file")
    ap.add_argument("--write-benign", help="write the benign look-alikes as templates to this file")
    ap.add_argument("--all-contexts", action="store_true", help="every key-name syntax for every rule (not written)")
    ap.add_argument("--with-optional", action="store_true", help="generate optional parts too (not written)")
    ap.add_argument("--examples", action="store_true",
                    help="also run Kingfisher's and Nosey Parker's own example lines (measured, never written)")
    ap.add_argument("-v", action="store_true", help="also list the rules whose format can't be generated")
    a = ap.parse_args()
    global OPTIONAL
    OPTIONAL = 1 if a.with_optional else 0
    rules = list(gitleaks_rules(a.gitleaks)) + list(kingfisher_rules(a.kingfisher))
    if a.noseyparker and os.path.exists(a.noseyparker):
        rules += list(noseyparker_rules(a.noseyparker))
    if a.trufflehog and os.path.exists(a.trufflehog):
        rules += list(trufflehog_rules(a.trufflehog))
    bin_path = a.bin or os.path.join(subprocess.run(["swift", "build", "-c", "release", "--show-bin-path"],
                                                    capture_output=True, text=True).stdout.strip(), "codingbridge")
    cases, _ = measure(bin_path, rules, a.v, a.all_contexts)
    benign = measure_benign(bin_path, rules)
    if a.examples:
        measure_examples(bin_path, rules)
    if a.write_corpus:
        write(a.write_corpus, HEADER_SECRETS, [f"{t}" for _, t, _ in cases])
    if a.write_benign:
        write(a.write_benign, HEADER_BENIGN, benign)


HEADER_SECRETS = """# Held-out set 9 (#19 fourth round): generated by scripts/redact-coverage.py from the
# formats (prefix, alphabet, length of the secret part) that the gitleaks, Kingfisher and
# TruffleHog rule sets document, one or two cases per rule of theirs: the secret under a
# key name in env/YAML/JSON/code syntax, and bare in a log line when the format has its
# own prefix. Values are {{alphabet:n}} templates (fixed seed). Measured before the rules
# for it: recall 0.948 (gitleaks), 0.905 (Kingfisher), 0.871 (TruffleHog). Same format
# as secrets.txt.
"""
HEADER_BENIGN = """# Benign lines 6 (#19 fourth round): generated by scripts/redact-coverage.py: the random
# parts of each generated format without their prefix, in a line that names no secret,
# plus hashes, digests and UUIDs. Same format as benign.txt.
"""


def write(path, header, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.write(header + "".join(l + "\n" for l in lines))


if __name__ == "__main__":
    main()
