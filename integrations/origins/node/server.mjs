// A protected site in Node (Express) that lets through only visitors holding
// a valid waitroom pass of one room, and sends everyone else to its waiting
// page. Two ways to check a pass:
//   offline: the signature by the room's JWKS (fetched from waitroom, cached),
//            the room and the expiry; no call to waitroom per request, but a
//            pass revoked or given up before it expires still passes.
//   api:     GET /api/verify on waitroom for each request: sees revocations.
//
// Environment: WAITROOM_URL (https://queue.example), WAITROOM_ROOM
// (spring-sale), WAITROOM_VERIFY (offline | api), PORT.
import express from "express";
import { createRemoteJWKSet, jwtVerify } from "jose";

const WAITROOM_URL = process.env.WAITROOM_URL;
const ROOM = process.env.WAITROOM_ROOM;
const WAITING_ROOM = `${WAITROOM_URL}/rooms/${encodeURIComponent(ROOM)}`;
const PASS = "wr_pass";

// jose keeps the keys for cacheMaxAge and fetches again for an unknown kid
// (a key rotation), at most once per cooldownDuration.
const jwks = createRemoteJWKSet(new URL("/.well-known/jwks.json", WAITROOM_URL), {
  cacheMaxAge: 5 * 60 * 1000,
  cooldownDuration: 30 * 1000,
  timeoutDuration: 2000,
});

/// The visitor's id if `pass` is valid for ROOM, else null.
async function verifyOffline(pass) {
  try {
    const { payload } = await jwtVerify(pass, jwks, {
      algorithms: ["EdDSA"],
      requiredClaims: ["sub", "room", "exp"],
    });
    return payload.room === ROOM ? payload.sub : null;
  } catch {
    return null;
  }
}

async function verifyOnline(pass) {
  const answer = await fetch(`${WAITROOM_URL}/api/verify?room=${encodeURIComponent(ROOM)}`, {
    headers: { Authorization: `Bearer ${pass}` },
    signal: AbortSignal.timeout(2000),
  });
  if (answer.status === 204) return answer.headers.get("X-Waitroom-Visitor");
  if (answer.status === 401) return null;
  throw new Error(`waitroom's /api/verify answered ${answer.status}`);
}

const verify = process.env.WAITROOM_VERIFY === "api" ? verifyOnline : verifyOffline;

function presentedPass(req) {
  const bearer = /^Bearer (.+)$/.exec(req.get("Authorization") ?? "");
  if (bearer) return bearer[1];
  for (const part of (req.get("Cookie") ?? "").split(";")) {
    const [name, ...value] = part.trim().split("=");
    if (name === PASS) return value.join("=");
  }
  return null;
}

async function waitingRoomGate(req, res, next) {
  try {
    // First request back from the waiting room: ?wr_pass=… becomes the
    // cookie, and the visitor goes on to the same URL without it.
    const url = new URL(req.originalUrl, "http://site");
    const offered = url.searchParams.get(PASS);
    if (offered !== null) {
      if (!(await verify(offered))) return res.redirect(302, WAITING_ROOM);
      url.searchParams.delete(PASS);
      res.cookie(PASS, offered, { httpOnly: true, sameSite: "lax", secure: req.secure, path: "/" });
      res.set("Referrer-Policy", "no-referrer");
      return res.redirect(303, url.pathname + url.search);
    }
    const pass = presentedPass(req);
    const visitor = pass && (await verify(pass));
    if (!visitor) return res.redirect(302, WAITING_ROOM);
    req.waitroomVisitor = visitor;
    next();
  } catch (error) {
    // waitroom unreachable in api mode: this site fails closed; serve the
    // page here instead to fail open.
    console.error(error.message);
    res.status(503).set("Retry-After", "5").send("Please try again in a moment.");
  }
}

const app = express();
app.use(waitingRoomGate);
app.get("/{*path}", (req, res) => res.type("text").send(`protected: ${req.waitroomVisitor}`));
app.listen(Number(process.env.PORT), "127.0.0.1");
