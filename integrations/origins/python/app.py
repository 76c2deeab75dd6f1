"""A protected site in Python (Flask) that lets through only visitors holding
a valid waitroom pass of one room, and sends everyone else to its waiting
page. Two ways to check a pass:
  offline: the signature by the room's JWKS (fetched from waitroom, cached),
           the room and the expiry; no call to waitroom per request, but a
           pass revoked or given up before it expires still passes.
  api:     GET /api/verify on waitroom for each request: sees revocations.

Environment: WAITROOM_URL (https://queue.example), WAITROOM_ROOM
(spring-sale), WAITROOM_VERIFY (offline | api), PORT.
"""

import os
import urllib.error
import urllib.parse
import urllib.request

import jwt
from flask import Flask, abort, g, redirect, request

WAITROOM_URL = os.environ["WAITROOM_URL"]
ROOM = os.environ["WAITROOM_ROOM"]
WAITING_ROOM = f"{WAITROOM_URL}/rooms/{urllib.parse.quote(ROOM)}"
PASS = "wr_pass"

# PyJWT keeps the key set for `lifespan` seconds, and fetches it again for
# a kid it does not know (a key rotation), at most every `cooldown_duration`
# seconds.
jwks = jwt.PyJWKClient(
    f"{WAITROOM_URL}/.well-known/jwks.json", lifespan=300, cooldown_duration=30, timeout=2
)


def verify_offline(token):
    """The visitor's id if `token` is a valid pass of ROOM, else None."""
    try:
        key = jwks.get_signing_key_from_jwt(token)
        claims = jwt.decode(
            token,
            key.key,
            algorithms=["EdDSA"],
            options={"require": ["sub", "room", "exp"]},
        )
    except jwt.PyJWTError:
        return None
    return claims["sub"] if claims["room"] == ROOM else None


class WaitroomUnreachable(Exception):
    pass


def verify_online(token):
    query = urllib.parse.urlencode({"room": ROOM})
    check = urllib.request.Request(
        f"{WAITROOM_URL}/api/verify?{query}",
        headers={"Authorization": f"Bearer {token}"},
    )
    try:
        with urllib.request.urlopen(check, timeout=2) as answer:
            if answer.status == 204:
                return answer.headers["X-Waitroom-Visitor"]
    except urllib.error.HTTPError as answer:
        if answer.code == 401:
            return None
        raise WaitroomUnreachable(f"/api/verify answered {answer.code}") from answer
    except OSError as error:
        raise WaitroomUnreachable(str(error)) from error
    raise WaitroomUnreachable("/api/verify answered neither 204 nor 401")


verify = verify_online if os.environ.get("WAITROOM_VERIFY") == "api" else verify_offline

app = Flask(__name__)


def presented_pass():
    authorization = request.headers.get("Authorization", "")
    if authorization.startswith("Bearer "):
        return authorization[len("Bearer ") :]
    return request.cookies.get(PASS)


@app.before_request
def waiting_room_gate():
    try:
        # First request back from the waiting room: ?wr_pass=... becomes the
        # cookie, and the visitor goes on to the same URL without it.
        offered = request.args.get(PASS)
        if offered is not None:
            if not verify(offered):
                return redirect(WAITING_ROOM, 302)
            rest = [(k, v) for k, v in request.args.items(multi=True) if k != PASS]
            clean = request.path + (f"?{urllib.parse.urlencode(rest)}" if rest else "")
            answer = redirect(clean, 303)
            answer.set_cookie(
                PASS, offered, httponly=True, samesite="Lax", secure=request.is_secure
            )
            answer.headers["Referrer-Policy"] = "no-referrer"
            return answer
        token = presented_pass()
        visitor = token and verify(token)
        if not visitor:
            return redirect(WAITING_ROOM, 302)
        g.waitroom_visitor = visitor
    except WaitroomUnreachable as error:
        # In api mode this site fails closed; let the request through here
        # instead to fail open.
        app.logger.error("waitroom: %s", error)
        abort(503)
    return None


@app.get("/")
@app.get("/<path:path>")
def protected(path=""):
    return f"protected: {g.waitroom_visitor}", 200, {"Content-Type": "text/plain"}


if __name__ == "__main__":
    # Flask's own server, for the test; behind a real WSGI server (gunicorn)
    # in production.
    app.run(host="127.0.0.1", port=int(os.environ["PORT"]))
