// A protected site in Go (net/http) that lets through only visitors holding
// a valid waitroom pass of one room, and sends everyone else to its waiting
// page. Two ways to check a pass:
//
//	offline: the signature by the room's JWKS (fetched from waitroom, cached),
//	         the room and the expiry; no call to waitroom per request, but a
//	         pass revoked or given up before it expires still passes.
//	api:     GET /api/verify on waitroom for each request: sees revocations.
//
// Environment: WAITROOM_URL (https://queue.example), WAITROOM_ROOM
// (spring-sale), WAITROOM_VERIFY (offline | api), PORT.
//
// Uses github.com/golang-jwt/jwt v4 (Debian's golang-github-golang-jwt-jwt-dev,
// at that import path in GOPATH mode; with modules, import
// github.com/golang-jwt/jwt/v4 or v5).
package main

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/golang-jwt/jwt"
)

const passName = "wr_pass"

// PassClaims are a pass's claims: sub (the visitor), room, iat, exp, jti.
type PassClaims struct {
	Room string `json:"room"`
	jwt.RegisteredClaims
}

// JWKS keeps the room's public keys by kid, fetched from waitroom: again once
// stale, or for a kid it lacks (a key rotation), at most every 30 s. By hand,
// as Debian packages no JWKS client for Go; it is a small map.
type JWKS struct {
	url          string
	mu           sync.Mutex
	keys         map[string]ed25519.PublicKey
	staleAt      time.Time
	unknownKidAt time.Time
}

const (
	jwksTTL             = 5 * time.Minute
	unknownKidRefetch   = 30 * time.Second
	waitroomCallTimeout = 2 * time.Second
)

var client = &http.Client{Timeout: waitroomCallTimeout}

func (j *JWKS) key(kid string) (ed25519.PublicKey, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	now := time.Now()
	if _, known := j.keys[kid]; now.After(j.staleAt) || (!known && now.After(j.unknownKidAt)) {
		if err := j.refresh(); err != nil {
			// Keep the keys we had (the passes they signed stay valid).
			log.Printf("waitroom JWKS fetch failed: %v", err)
			j.staleAt, j.unknownKidAt = now.Add(unknownKidRefetch), now.Add(unknownKidRefetch)
		}
	}
	key, ok := j.keys[kid]
	return key, ok
}

func (j *JWKS) refresh() error {
	answer, err := client.Get(j.url)
	if err != nil {
		return err
	}
	defer answer.Body.Close()
	if answer.StatusCode != http.StatusOK {
		return fmt.Errorf("the JWKS answered %d", answer.StatusCode)
	}
	var set struct {
		Keys []struct{ Kty, Crv, Kid, X string }
	}
	if err := json.NewDecoder(answer.Body).Decode(&set); err != nil {
		return err
	}
	keys := map[string]ed25519.PublicKey{}
	for _, k := range set.Keys {
		x, err := base64.RawURLEncoding.DecodeString(k.X)
		if k.Kty == "OKP" && k.Crv == "Ed25519" && err == nil && len(x) == ed25519.PublicKeySize {
			keys[k.Kid] = ed25519.PublicKey(x)
		}
	}
	now := time.Now()
	j.keys, j.staleAt, j.unknownKidAt = keys, now.Add(jwksTTL), now.Add(unknownKidRefetch)
	return nil
}

var errUnreachable = errors.New("waitroom unreachable")

// Verifier says whose a pass is: the visitor's id, or "" for no valid pass.
type Verifier func(pass string) (string, error)

func offline(jwks *JWKS, room string) Verifier {
	// The algorithm is ours to choose, never the token's.
	parser := jwt.NewParser(jwt.WithValidMethods([]string{"EdDSA"}))
	return func(pass string) (string, error) {
		var claims PassClaims
		_, err := parser.ParseWithClaims(pass, &claims, func(token *jwt.Token) (interface{}, error) {
			kid, _ := token.Header["kid"].(string)
			if key, ok := jwks.key(kid); ok {
				return key, nil
			}
			return nil, errors.New("unknown kid")
		})
		// v4 checks exp only when present: a pass always has one.
		if err != nil || claims.ExpiresAt == nil || claims.Room != room || claims.Subject == "" {
			return "", nil
		}
		return claims.Subject, nil
	}
}

func online(waitroomURL, room string) Verifier {
	verifyURL := waitroomURL + "/api/verify?room=" + url.QueryEscape(room)
	return func(pass string) (string, error) {
		check, _ := http.NewRequest(http.MethodGet, verifyURL, nil)
		check.Header.Set("Authorization", "Bearer "+pass)
		answer, err := client.Do(check)
		if err != nil {
			return "", fmt.Errorf("%w: %v", errUnreachable, err)
		}
		answer.Body.Close()
		switch answer.StatusCode {
		case http.StatusNoContent:
			return answer.Header.Get("X-Waitroom-Visitor"), nil
		case http.StatusUnauthorized:
			return "", nil
		}
		return "", fmt.Errorf("%w: /api/verify answered %d", errUnreachable, answer.StatusCode)
	}
}

func presentedPass(r *http.Request) string {
	if auth := r.Header.Get("Authorization"); len(auth) > 7 && auth[:7] == "Bearer " {
		return auth[7:]
	}
	if cookie, err := r.Cookie(passName); err == nil {
		return cookie.Value
	}
	return ""
}

// Gate lets through to next only requests with a valid pass.
func Gate(verify Verifier, waitingRoom string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// First request back from the waiting room: ?wr_pass=… becomes the
		// cookie, and the visitor goes on to the same URL without it.
		query := r.URL.Query()
		offered, fromLink := query[passName]
		pass := presentedPass(r)
		if fromLink {
			pass = offered[0]
		}
		visitor := ""
		if pass != "" {
			var err error
			if visitor, err = verify(pass); err != nil {
				// In api mode this site fails closed; call next here instead
				// to fail open.
				log.Print(err)
				w.Header().Set("Retry-After", "5")
				http.Error(w, "Please try again in a moment.", http.StatusServiceUnavailable)
				return
			}
		}
		if visitor == "" {
			http.Redirect(w, r, waitingRoom, http.StatusFound)
			return
		}
		if fromLink {
			query.Del(passName)
			clean := r.URL.Path
			if len(query) > 0 {
				clean += "?" + query.Encode()
			}
			http.SetCookie(w, &http.Cookie{Name: passName, Value: pass, Path: "/",
				HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil})
			w.Header().Set("Referrer-Policy", "no-referrer")
			http.Redirect(w, r, clean, http.StatusSeeOther)
			return
		}
		r.Header.Set("X-Waitroom-Visitor", visitor)
		next.ServeHTTP(w, r)
	})
}

func main() {
	waitroomURL, room := os.Getenv("WAITROOM_URL"), os.Getenv("WAITROOM_ROOM")
	verify := offline(&JWKS{url: waitroomURL + "/.well-known/jwks.json"}, room)
	if os.Getenv("WAITROOM_VERIFY") == "api" {
		verify = online(waitroomURL, room)
	}
	site := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "protected: %s", r.Header.Get("X-Waitroom-Visitor"))
	})
	waitingRoom := waitroomURL + "/rooms/" + url.PathEscape(room)
	log.Fatal(http.ListenAndServe("127.0.0.1:"+os.Getenv("PORT"), Gate(verify, waitingRoom, site)))
}
