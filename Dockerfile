# syntax=docker/dockerfile:1
# Threadcast image: the three binaries (ingest, fanout, threadcast), static,
# on distroless/static as a non-root user. The Helm chart
# (deploy/helm/threadcast) runs /ingest and /fanout from this image.
#
#   docker build -t ghcr.io/threadcast/threadcast:0.1.0 .

# --- build: pinned Go toolchain (go.mod says go 1.26.8) ---
FROM golang:1.26.8-bookworm AS build
WORKDIR /src
# Modules first, so a source change does not re-download them.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# CGO_ENABLED=0: fully static binaries (distroless/static has no libc);
# -trimpath and -s -w: reproducible and smaller.
ARG VERSION=dev
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w" -o /out/ingest ./cmd/ingest \
 && CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w" -o /out/fanout ./cmd/fanout \
 && CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w" -o /out/threadcast ./cmd/threadcast

# --- run: no shell, no package manager, uid 65532 ---
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ingest /out/fanout /out/threadcast /
USER 65532:65532
# fanout HTTP (public), ingest HTTP (health, metrics, bridge)
EXPOSE 8080 8081
ENTRYPOINT ["/threadcast"]
