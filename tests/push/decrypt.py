"""A browser's side of a web push, for tests/api/push.rs: decrypts an
aes128gcm body (RFC 8291) with the browser's private key and auth secret,
through http_ece, an implementation that is not ours.

Reads {"private_key", "auth", "body"} (base64url) as JSON on stdin and
writes the plaintext to stdout.
"""

import base64
import json
import sys

import http_ece
from cryptography.hazmat.primitives.asymmetric import ec


def b64(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


given = json.load(sys.stdin)
private_key = ec.derive_private_key(
    int.from_bytes(b64(given["private_key"]), "big"), ec.SECP256R1()
)
# The sender's public key comes from the body's header (its key id).
plaintext = http_ece.decrypt(
    b64(given["body"]),
    private_key=private_key,
    auth_secret=b64(given["auth"]),
    version="aes128gcm",
)
sys.stdout.buffer.write(plaintext)
