# aosd in a container: `docker build -t aosd .` from the repository root,
# then (docs/operations.md, "Running in a container"):
#
#   docker run -d --name aos -p 127.0.0.1:7878:7878 -v aos-data:/data --stop-timeout 90 aosd
#   docker exec aos cat /data/world/token        # the API's bearer token
#
# The image runs `aosd serve` as the unprivileged user aos (uid 10001) on the
# volume /data, creating the world there on first start (--init). The API
# listens on every interface of the container, behind the token the world
# keeps in /data/world/token: publish the port on loopback, or put a TLS
# proxy in front (deploy/nginx/aos.conf).

# --- build: the same Go toolchain the repository needs (go.mod) -----------
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Pure Go: no cgo, so the binary runs on any base image.
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags="-s -w" -o /out/aosd ./cmd/aosd

# --- run ------------------------------------------------------------------
FROM debian:bookworm-slim
# ca-certificates: the built-in sys/http.request@1 executor calls HTTPS
# services. tini: PID 1 that forwards SIGTERM and reaps.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates tini \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 aos \
 && useradd --system --uid 10001 --gid aos --home-dir /data --shell /usr/sbin/nologin aos \
 && mkdir -p /data && chown aos:aos /data && chmod 0700 /data
COPY --from=build /out/aosd /usr/local/bin/aosd
USER aos:aos
ENV AOS_WORLD=/data/world
VOLUME ["/data"]
EXPOSE 7878
# aosd stops on SIGTERM: the HTTP API drains (up to 10 s), then the world
# closes with everything acknowledged durable. Give it time (docker stop -t,
# compose's stop_grace_period); a SIGKILL after that loses nothing
# acknowledged, but the next start replays more.
STOPSIGNAL SIGTERM
# Healthy while the daemon answers its own API with the world's token
# (status goes through the daemon named in /data/world/daemon.json).
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 \
  CMD ["/usr/local/bin/aosd", "status", "--world", "/data/world"]
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/aosd"]
CMD ["serve", "--init", "--world", "/data/world", "--listen", "0.0.0.0:7878"]
