#!/usr/bin/env python3
"""Merge an OpenRPC fragment into rpc-spec/openrpc.json under a file lock.

Usage: scripts/spec.py FRAGMENT.json
The fragment is {"methods": [...], "schemas": {...}, "errors": {...}}; methods
replace any of the same name, schemas/errors replace same-named entries.
Methods stay sorted by name so concurrent areas don't fight over order.
Then re-embeds the document (scripts/embed-spec.sh).
"""
import fcntl, json, os, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPEC = os.path.join(ROOT, "rpc-spec", "openrpc.json")

def main():
    frag = json.load(open(sys.argv[1], encoding="utf-8"))
    with open(SPEC + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        doc = json.load(open(SPEC, encoding="utf-8"))
        methods = {m["name"]: m for m in doc["methods"]}
        for m in frag.get("methods", []):
            methods[m["name"]] = m
        doc["methods"] = [methods[k] for k in sorted(methods)]
        comps = doc.setdefault("components", {})
        for key in ("schemas", "errors"):
            comps.setdefault(key, {}).update(frag.get(key, {}))
        tmp = SPEC + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=2, ensure_ascii=False)
            f.write("\n")
        os.replace(tmp, SPEC)
        subprocess.run([os.path.join(ROOT, "scripts", "embed-spec.sh")], check=True)

if __name__ == "__main__":
    main()
