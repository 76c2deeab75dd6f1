# workerd's configuration for the edge worker (the test runs this file with
# its addresses replaced). On Cloudflare, wrangler.toml's [vars] hold the
# same bindings instead, and ORIGIN_URL is left out: the worker runs on the
# site's route and its fetch goes on to the site's origin.
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "edge", worker = .edgeWorker),
    # Outbound fetches (the JWKS, the origin): this config reaches addresses
    # on this machine too; workerd's default allows public ones only.
    (name = "network", network = (allow = ["public", "private", "local"])),
  ],
  sockets = [(name = "http", address = "127.0.0.1:8787", http = (), service = "edge")],
);

const edgeWorker :Workerd.Worker = (
  modules = [(name = "worker.js", esModule = embed "worker.js")],
  compatibilityDate = "2025-11-01",
  bindings = [
    (name = "WAITROOM_URL", text = "http://127.0.0.1:8080"),
    (name = "ROOM", text = "spring-sale"),
    (name = "ORIGIN_URL", text = "http://127.0.0.1:3000"),
  ],
  globalOutbound = "network",
);
