// waitroom's edge worker: a Cloudflare Workers module (also runs in workerd)
// that lets through only visitors holding a valid pass of one room, and sends
// everyone else to that room's waiting page.
//
// It checks the pass offline (signature by the room's JWKS, room, expiry), so
// it adds no round trip to waitroom per request; the JWKS is fetched from
// waitroom and kept for JWKS_TTL_MS. Offline checks cannot see a pass revoked
// or given up before it expires: call /api/verify where that matters.
//
// Bindings (wrangler.toml [vars], or the workerd config's `bindings`):
//   WAITROOM_URL  the waiting room's public base URL (https://queue.example)
//   ROOM          the room whose passes open this site (spring-sale)
//   ORIGIN_URL    optional: the origin to forward to; without it the request
//                 goes where it was going (the zone's origin, on Cloudflare)
//
// Written against WebCrypto alone (Ed25519 is built into Workers), so the
// worker needs no bundler and no dependency.

const PASS = "wr_pass";
/// As long as waitroom lets the JWKS be cached (Cache-Control: max-age=300).
const JWKS_TTL_MS = 5 * 60 * 1000;
/// A pass naming a kid we don't know fetches the JWKS again (a key
/// rotation), but at most this often, so forged kids can't make us hammer it.
const UNKNOWN_KID_REFETCH_MS = 30 * 1000;

export default {
  async fetch(request, env) {
    const url = new URL(request.url);

    // First request back from the waiting room: ?wr_pass=… becomes the
    // cookie, and the visitor goes to the same URL without it, so the pass is
    // not bookmarked, shared or kept in history.
    const offered = url.searchParams.get(PASS);
    if (offered !== null) {
      if (!(await verifyPass(offered, env))) return toWaitingRoom(env);
      url.searchParams.delete(PASS);
      const secure = url.protocol === "https:" ? "; Secure" : "";
      return new Response(null, {
        status: 303,
        headers: {
          Location: url.pathname + url.search,
          "Set-Cookie": `${PASS}=${offered}; Path=/; HttpOnly; SameSite=Lax${secure}`,
          "Referrer-Policy": "no-referrer",
          "Cache-Control": "no-store",
        },
      });
    }

    const pass = cookie(request.headers.get("Cookie"), PASS);
    const claims = pass && (await verifyPass(pass, env));
    if (!claims) return toWaitingRoom(env);

    // Tell the origin who the visitor is (never what the client claims).
    const headers = new Headers(request.headers);
    headers.set("X-Waitroom-Visitor", claims.sub);
    const target = env.ORIGIN_URL ? new URL(url.pathname + url.search, env.ORIGIN_URL) : url;
    return fetch(new Request(target, new Request(request, { headers })));
  },
};

function toWaitingRoom(env) {
  return new Response(null, {
    status: 302,
    headers: {
      Location: `${env.WAITROOM_URL}/rooms/${encodeURIComponent(env.ROOM)}`,
      "Cache-Control": "no-store",
    },
  });
}

/// The claims of `token` if it is a pass of env.ROOM, signed by a key of the
/// room's JWKS and not expired; else null.
async function verifyPass(token, env) {
  const parts = token.split(".");
  if (parts.length !== 3) return null;
  let header, claims, signature;
  try {
    header = JSON.parse(base64urlText(parts[0]));
    claims = JSON.parse(base64urlText(parts[1]));
    signature = base64urlBytes(parts[2]);
  } catch {
    return null;
  }
  // The algorithm is ours to choose, never the token's ("none", HS256…).
  if (header.alg !== "EdDSA" || typeof header.kid !== "string") return null;
  const key = await publicKey(header.kid, env);
  if (!key) return null;
  const signed = new TextEncoder().encode(`${parts[0]}.${parts[1]}`);
  // verify throws on a signature of the wrong length.
  const valid = await crypto.subtle.verify("Ed25519", key, signature, signed).catch(() => false);
  if (!valid) return null;
  if (claims.room !== env.ROOM) return null;
  if (typeof claims.exp !== "number" || claims.exp * 1000 <= Date.now()) return null;
  if (typeof claims.sub !== "string") return null;
  return claims;
}

// The JWKS as CryptoKeys by kid, kept per isolate: fetched again once
// stale, or for a kid it lacks (at most every UNKNOWN_KID_REFETCH_MS).
let jwks = { keys: new Map(), staleAt: 0, unknownKidRefetchAt: 0 };
let refreshing = null;

async function publicKey(kid, env) {
  const now = Date.now();
  if (now >= jwks.staleAt || (!jwks.keys.has(kid) && now >= jwks.unknownKidRefetchAt)) {
    // One fetch at a time, shared by the requests that wait for it.
    refreshing ??= refreshJwks(env).finally(() => (refreshing = null));
    await refreshing;
  }
  return jwks.keys.get(kid) ?? null;
}

async function refreshJwks(env) {
  const now = Date.now();
  try {
    const answer = await fetch(`${env.WAITROOM_URL}/.well-known/jwks.json`);
    if (!answer.ok) throw new Error(`the JWKS answered ${answer.status}`);
    const keys = new Map();
    for (const jwk of (await answer.json()).keys) {
      if (jwk.kty !== "OKP" || jwk.crv !== "Ed25519") continue;
      const key = await crypto.subtle.importKey(
        "jwk",
        { kty: "OKP", crv: "Ed25519", x: jwk.x },
        { name: "Ed25519" },
        false,
        ["verify"],
      );
      keys.set(jwk.kid, key);
    }
    jwks = { keys, staleAt: now + JWKS_TTL_MS, unknownKidRefetchAt: now + UNKNOWN_KID_REFETCH_MS };
  } catch (error) {
    // waitroom unreachable: keep the keys we had (the passes they signed
    // stay valid), and try again in a while rather than on every request.
    console.error("waitroom JWKS fetch failed:", error.message);
    const retryAt = now + UNKNOWN_KID_REFETCH_MS;
    jwks = { keys: jwks.keys, staleAt: retryAt, unknownKidRefetchAt: retryAt };
  }
}

function base64urlBytes(text) {
  const binary = atob(text.replace(/-/g, "+").replace(/_/g, "/"));
  return Uint8Array.from(binary, (c) => c.charCodeAt(0));
}

function base64urlText(text) {
  return new TextDecoder().decode(base64urlBytes(text));
}

function cookie(header, name) {
  for (const part of (header ?? "").split(";")) {
    const [key, ...value] = part.trim().split("=");
    if (key === name) return value.join("=");
  }
  return null;
}
