"""A receiver for waitroom's webhook, on Python's standard library alone.

It checks the Waitroom-Signature header (HMAC-SHA256 of "<t>.<body>" under
the room's notify_webhook_secret, compared in constant time), refuses a
signature more than 5 minutes from now (a replayed request), and answers
an event id it has already had as a duplicate (delivery is at least once:
a retry, or a second node's attempt, sends the same id again).

    WEBHOOK_SECRET='the room's notify_webhook_secret' python3 receiver.py 8000

It listens on 127.0.0.1: put it behind your https proxy.
"""

import hashlib
import hmac
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SECRET = os.environ["WEBHOOK_SECRET"].encode()
TOLERANCE_S = 5 * 60  # a signature further from now than this is refused
REMEMBER_S = 60 * 60  # ids are kept an hour: waitroom retries for 10 minutes
MAX_BODY_BYTES = 64 * 1024

# Event id -> when it was first accepted. In memory for the example: with
# more than one process, use your database (a unique key on the id).
seen = {}
seen_lock = threading.Lock()


def verify(header, body, now):
    """Whether `header` signs `body` with SECRET, at a time near `now`."""
    t, signatures = None, []
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        if key == "t" and value.isascii() and value.isdigit():
            t = value
        elif key == "v1":
            signatures.append(value.encode("latin-1"))
    if t is None or abs(now - int(t)) > TOLERANCE_S:
        return False
    expected = hmac.new(SECRET, t.encode() + b"." + body, hashlib.sha256).hexdigest()
    return any(hmac.compare_digest(expected.encode(), s) for s in signatures)


def first_time(event_id, now):
    """Records `event_id`; False if it was already recorded."""
    with seen_lock:
        for old in [i for i, at in seen.items() if now - at > REMEMBER_S]:
            del seen[old]
        if event_id in seen:
            return False
        seen[event_id] = now
        return True


def handle(event):
    """Your part: tell the visitor it is nearly their turn ("near") or that
    it is ("admitted"), at event["contact"], with event["resume_url"].
    Answer within 5 seconds: queue slow work rather than do it here. And
    never log the contact."""
    print(f"{event['type']} for visitor {event['visitor']} in {event['room']}", flush=True)


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            return self.answer(400, {"error": "bad length"})
        if not 0 <= length <= MAX_BODY_BYTES:
            return self.answer(413, {"error": "too large"})
        body = self.rfile.read(length)
        now = time.time()
        if not verify(self.headers.get("Waitroom-Signature", ""), body, now):
            return self.answer(401, {"error": "bad or stale signature"})
        try:
            event = json.loads(body)
            event_id = event["id"]
        except (ValueError, KeyError, TypeError):
            return self.answer(400, {"error": "not an event"})
        if not first_time(event_id, now):
            return self.answer(200, {"duplicate": True})
        try:
            handle(event)
        except Exception:
            with seen_lock:
                seen.pop(event_id, None)  # not handled: let the retry in
            return self.answer(500, {"error": "not handled"})
        self.answer(200, {"duplicate": False})

    def answer(self, status, message):
        body = json.dumps(message).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8000
    ThreadingHTTPServer(("127.0.0.1", port), Receiver).serve_forever()
