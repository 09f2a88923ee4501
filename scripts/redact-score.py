#!/usr/bin/env python3
"""Score corpus files (Tests/redact-corpus format) against a codingbridge binary.

A line with «…» is a secret case: caught when a finding overlaps the marked span (the
secret no longer appears whole in the output: RedactCorpusTests' criterion). A line without is benign: a false positive when any finding touches it.
Templates ({{alnum:32}}, ...) expand as in RedactCatalogTests (seeded by the line).

  scripts/redact-score.py [--bin PATH] [-v] FILE...
"""
import argparse
import importlib.util
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("coverage", os.path.join(HERE, "redact-coverage.py"))
coverage = importlib.util.module_from_spec(spec)
spec.loader.exec_module(coverage)


def cases(path):
    with open(path, encoding="utf-8") as f:
        return [l.rstrip("\n") for l in f if l.strip() and not l.startswith("#")]


def score(bin_path, path, verbose):
    lines = cases(path)
    texts, hits = coverage.run(bin_path, lines)
    spans = [coverage.expand_case(l)[1] for l in lines]
    secret = [(t, h, s) for t, h, s in zip(texts, hits, spans) if s]
    benign = [(t, h) for t, h, s in zip(texts, hits, spans) if not s]
    missed = [(t, h, s) for t, h, s in secret if not covered(h, s)]
    fps = [(t, h) for t, h in benign if h]
    parts = [os.path.basename(path) + ":"]
    if secret:
        parts.append(f"recall {len(secret) - len(missed)}/{len(secret)} = {1 - len(missed) / len(secret):.3f}")
    if benign:
        parts.append(f"false positives {len(fps)}/{len(benign)} = {len(fps) / len(benign):.3f}")
    print(" ".join(parts))
    if verbose:
        for t, h, s in missed:
            print(f"  MISS {t[:200]!r} found {[(a, b, r) for a, b, r in h]}")
        for t, h in fps:
            print(f"  FP {h[0][2]}: {t[:200]!r}")


def covered(hits, span):
    return any(a < span[1] and b > span[0] for a, b, _ in hits)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=None, help="codingbridge binary (default: the release build)")
    ap.add_argument("-v", action="store_true", help="list the misses and false positives")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    bin_path = a.bin or os.path.join(subprocess.run(["swift", "build", "-c", "release", "--show-bin-path"],
                                                    capture_output=True, text=True).stdout.strip(), "codingbridge")
    for path in a.files:
        score(bin_path, path, a.v)


if __name__ == "__main__":
    main()
