//! The deployment as the docs give it, run for real: the image and the
//! compose stack in podman, the unit, the Kubernetes manifests, and the
//! proxies' configs (nginx, Caddy, HAProxy; Traefik's and Envoy's parsed).

mod deploy;
mod nginx;
mod proxies;
