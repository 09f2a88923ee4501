"""The redaction engine end to end: the `redact` / `redact.rules` methods over
both framings (results validated against rpc-spec/openrpc.json by the client),
and `codingbridge redact` as a stdin -> stdout filter."""
import json
import os
import random
import subprocess
import threading
import time

import pytest

from conftest import RPCFailure, binary

RNG = random.Random(0x5EED)
ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def fake(n, alphabet=ALNUM):
    while True:
        s = "".join(RNG.choice(alphabet) for _ in range(n))
        if any(c.isdigit() for c in s) and any(c.isalpha() for c in s):
            return s


GH = "ghp_" + fake(36)
KEY = fake(24)


def test_redact_keeps_key_names_and_reports_byte_offsets(server):
    text = f"héllo ✓ export API_KEY={KEY} && curl -H 'Authorization: token {GH}' x"
    r = server.request("redact", {"text": text})
    assert r["text"] == "héllo ✓ export API_KEY=[REDACTED] && curl -H 'Authorization: token [REDACTED]' x"
    assert r["truncated"] is False and r["failSafe"] is False
    raw = text.encode()
    spans = [raw[f["start"]:f["end"]].decode() for f in r["findings"]]
    assert spans == [KEY, GH]
    assert [f["ruleId"] for f in r["findings"]] == ["generic-secret", "github-pat"]


def test_redact_labels(server):
    r = server.request("redact", {"text": f"token {GH}", "labels": True})
    assert r["text"] == "token [REDACTED:github-pat]"


def test_clean_text_is_returned_unchanged(server):
    text = "commit 3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39; session 550e8400-e29b-41d4-a716-446655440000; Edit /Users/me/app/.env.example"
    assert server.request("redact", {"text": text}) == {"text": text, "findings": [], "truncated": False, "failSafe": False}
    for t in ["API_KEY=$API_KEY", "password: ${DB_PASSWORD}", "key: <your-key>", "secret: {{ .Values.secret }}", ""]:
        assert server.request("redact", {"text": t})["text"] == t


def test_lock_screen_details_off_by_default(server):
    r = server.request("redact", {"text": f"Run: curl -u admin:{KEY} https://x", "mode": "lockScreen"})
    assert r["text"] == "Claude needs permission to continue"
    assert [f["ruleId"] for f in r["findings"]] == ["curl-user-password"]


def test_lock_screen_with_details_cuts_after_redacting(server):
    text = "é" * 195 + " " + GH + " and more text after the secret"
    r = server.request("redact", {"text": text, "mode": "lockScreen", "showDetails": True})
    assert r["truncated"] is True
    assert len(r["text"]) <= 200 and r["text"].startswith("é" * 195)
    assert "ghp_" not in r["text"] and GH[4:10] not in r["text"]
    short = server.request("redact", {"text": "Build finished", "mode": "lockScreen", "showDetails": True})
    assert short["text"] == "Build finished" and short["truncated"] is False


def test_private_key_escaped_in_json_string(server):
    body = "\\n".join(fake(64, ALNUM + "+/") for _ in range(4))
    text = '{"private_key": "-----BEGIN PRIVATE KEY-----\\n' + body + '\\n-----END PRIVATE KEY-----\\n"}'
    r = server.request("redact", {"text": text, "labels": True})
    assert "[REDACTED:private-key]" in r["text"] and body[:20] not in r["text"]


def test_large_text_with_nul_and_many_secrets(server):
    secrets = ["ghp_" + fake(36) for _ in range(50)]
    line = "2026-11-22T02:43:42Z INFO request ok path=/a status=200\u0000\n"
    text = "".join(line * 200 + f"token {s}\n" for s in secrets)
    r = server.request("redact", {"text": text}, timeout=30)
    assert len(r["findings"]) == 50
    assert not any(s in r["text"] for s in secrets)
    assert r["text"].count("\u0000") == text.count("\u0000")


@pytest.mark.parametrize("params,param", [
    ({}, "text"),
    ({"text": 42}, "text"),
    ({"text": "x", "mode": "lock"}, "mode"),
    ({"text": "x", "labels": "yes"}, "labels"),
    ({"text": "x", "showDetails": 1}, "showDetails"),
])
def test_invalid_params(server, params, param):
    with pytest.raises(RPCFailure) as e:
        server.request("redact", params)
    assert e.value.code == -32602
    assert e.value.data["param"] == param


def test_redact_rules_lists_the_catalog(server):
    r = server.request("redact.rules")
    ids = [x["id"] for x in r["rules"]]
    assert len(ids) >= 40 and len(set(ids)) == len(ids)
    assert all(x["builtIn"] for x in r["rules"])
    for must in ["aws-access-key-id", "github-pat", "github-fine-grained-pat", "slack-webhook-url", "openai-project-key",
                 "anthropic-api-key", "private-key", "jwt", "url-credentials", "generic-secret"]:
        assert must in ids


def test_catalog_files_are_generated_from_the_rules():
    """redact_catalog.c and RedactRuleExamples.swift are what redact-rules/ says."""
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    p = subprocess.run(["python3", os.path.join(root, "scripts", "embed-redact-rules.py"), "--check"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr


def test_cli_list_rules_counts_per_family():
    p = subprocess.run([binary(), "redact", "--list-rules"], capture_output=True, text=True, timeout=10)
    assert p.returncode == 0, p.stderr
    head, _, rules = p.stdout.partition("\n\n")
    lines = head.splitlines()
    total = int(lines[0].split()[0])
    counts = {l.split("\t")[0].strip(): int(l.split("\t")[1]) for l in lines[1:]}
    assert total >= 200 and sum(counts.values()) == total
    for family in ["cloud", "vcs", "infra", "messaging", "saas", "ai", "hashes", "passwords", "generic"]:
        assert counts.get(family, 0) >= 1, family
    assert len(rules.splitlines()) == total


def test_redact_over_lsp_framing(lsp_server):
    r = lsp_server.request("redact", {"text": f"GH_TOKEN={GH}"})
    assert r["text"] == "GH_TOKEN=[REDACTED]"


# -- the CLI filter ---------------------------------------------------------

def run_cli(data: bytes, *args, timeout=60):
    return subprocess.run([binary(), "redact", *args], input=data, capture_output=True, timeout=timeout)


def test_cli_filters_stdin_to_stdout():
    data = f"line one\nAPI_KEY={KEY}\ncommit 3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39\n".encode()
    p = run_cli(data)
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"line one\nAPI_KEY=[REDACTED]\ncommit 3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39\n"
    assert p.stderr == b""


@pytest.mark.parametrize("chunk", [1, 5, 64, 4096])
def test_cli_secret_across_chunk_boundaries(chunk):
    secret = "sk-ant-api03-" + fake(95, ALNUM + "-_")
    data = ("x" * 3000 + "\nANTHROPIC_API_KEY=" + secret + "\n" + "y" * 100 + "\n").encode()
    p = run_cli(data, "--chunk-size", str(chunk), "--labels", "--findings-json")
    assert p.returncode == 0, p.stderr
    assert secret[13:40].encode() not in p.stdout
    assert b"ANTHROPIC_API_KEY=[REDACTED:anthropic-api-key]\n" in p.stdout
    found = [json.loads(l) for l in p.stderr.decode().splitlines()]
    start = data.index(secret.encode())
    assert found == [{"ruleId": "anthropic-api-key", "start": start, "end": start + len(secret)}]


def test_cli_findings_text_and_invalid_bytes():
    data = b"\xff\xfe token " + GH.encode() + b" \x00 \xc3\x28\n"
    p = run_cli(data, "--findings")
    assert p.stdout == b"\xff\xfe token [REDACTED] \x00 \xc3\x28\n"
    assert p.stderr.decode().strip() == f"github-pat 9-{9 + len(GH)}"


def test_cli_custom_rule_and_invalid_pattern():
    p = run_cli(b"see TKT-123456 now\n", "--rule", "ticket=TKT-[0-9]{6}", "--labels")
    assert p.stdout == b"see [REDACTED:ticket] now\n"
    bad = run_cli(b"x", "--rule", "bad=ab(c")
    assert bad.returncode == 64
    assert b"missing closing parenthesis" in bad.stderr and b"offset" in bad.stderr


def test_cli_pathological_rule_fails_safe():
    p = run_cli(b"ok " + b"a" * 50 + b"!\n", "--rule", "evil=(a+)+$", "--findings")
    assert p.returncode == 0
    assert b"aaaa" not in p.stdout and b"[REDACTED]" in p.stdout
    assert b"fail-safe" in p.stderr


def test_cli_help_explains_usage():
    p = subprocess.run([binary(), "redact", "--help"], capture_output=True, timeout=10)
    out = p.stdout.decode()
    assert p.returncode == 0
    for word in ["stdin", "--labels", "--findings", "--rule", "bounded memory"]:
        assert word in out


def _hwm_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc")
def test_cli_streams_64_mib_in_bounded_memory():
    line = b"2026-11-22T02:43:42Z INFO request completed path=/api/v1/sessions status=200 duration_ms=35\n"
    secret_line = ("Authorization: Bearer " + fake(40) + "\n").encode()
    block = line * 999 + secret_line
    total_blocks = (64 << 20) // len(block)
    proc = subprocess.Popen([binary(), "redact"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out_len = [0]
    leaked = [False]

    def reader():
        while True:
            chunk = proc.stdout.read(1 << 20)
            if not chunk:
                return
            out_len[0] += len(chunk)
            if secret_line[22:40] in chunk:
                leaked[0] = True

    t = threading.Thread(target=reader)
    t.start()
    for _ in range(total_blocks):
        proc.stdin.write(block)
    proc.stdin.flush()
    time.sleep(0.2)
    hwm = _hwm_kib(proc.pid)
    proc.stdin.close()
    t.join(timeout=60)
    assert proc.wait(timeout=60) == 0
    assert not leaked[0]
    expected = total_blocks * (len(block) - 40 + len(b"[REDACTED]"))
    assert out_len[0] == expected
    # 64 MiB went through; the process never held more than a small window of it.
    assert 0 < hwm < 40 * 1024, f"peak RSS {hwm} KiB"
