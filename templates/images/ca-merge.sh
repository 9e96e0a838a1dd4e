#!/bin/sh
# Make the extra CA trusted by everything that reads the system bundle: regenerate the bundle
# when ca-certificates is installed (it picks up /usr/local/share/ca-certificates), and append
# the extra certificates when the bundle does not contain them yet (no ca-certificates package,
# or an update-ca-certificates that skipped a multi-certificate file).
extra=/usr/local/share/ca-certificates/setupbot-extra-ca.crt
bundle=/etc/ssl/certs/ca-certificates.crt
[ -f "$extra" ] || exit 0
if command -v update-ca-certificates >/dev/null 2>&1; then
    update-ca-certificates >/dev/null 2>&1 || true
fi
mkdir -p /etc/ssl/certs
marker=$(grep -v -- '-----' "$extra" | tail -n 1)
if [ ! -f "$bundle" ] || ! grep -qF -- "$marker" "$bundle"; then
    cat "$extra" >> "$bundle"
fi
exit 0
