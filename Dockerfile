# syntax=docker/dockerfile:1
#
# jupyter-collab-mcp as a container: a static binary on distroless, non-root, serving Streamable
# HTTP on :8080 (path /mcp, liveness /healthz).
#
#   docker build --build-arg VERSION=0.1.0 -t jupyter-collab-mcp:0.1.0 .      (or: make image)
#   docker run --rm -p 8080:8080 \
#     -e JUPYTER_URL=http://jupyter:8888/ -e JUPYTER_TOKEN=… -e MCP_TOKEN=$(openssl rand -hex 24) \
#     jupyter-collab-mcp:0.1.0
#
# The default command is `--listen 0.0.0.0:8080`; any other arguments replace it (pass --listen
# yourself then). Every flag has an environment variable (see --help), and secrets are read from
# the environment or *_FILE variables only. `make static` builds the same binary as the build stage.

ARG GO_VERSION=1.26.8

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
# Modules first: this layer is reused until go.mod/go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
# Set by BuildKit for the platform being built (--platform); empty means the build host's.
ARG TARGETOS
ARG TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/jupyter-collab-mcp ./cmd/jupyter-collab-mcp

# distroless/static: CA certificates, tzdata and /etc/passwd, no shell, no libc.
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.title="jupyter-collab-mcp" \
      org.opencontainers.image.description="MCP server that works on live Jupyter notebooks as a real-time collaborator" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/jupyter-collab-mcp /usr/local/bin/jupyter-collab-mcp
# 65532 is distroless's "nonroot"; numeric so Kubernetes' runAsNonRoot can verify it.
USER 65532:65532
ENV LOG_FORMAT=json
EXPOSE 8080
# No HEALTHCHECK: the image has no shell or HTTP client to run one, and the binary has no
# self-check mode. Orchestrators probe GET /healthz (liveness) and GET /readyz (readiness) instead;
# see deploy/z2jh/values.yaml.
ENTRYPOINT ["/usr/local/bin/jupyter-collab-mcp"]
CMD ["--listen", "0.0.0.0:8080"]
