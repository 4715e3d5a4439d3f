# syntax=docker/dockerfile:1
# Builds the product binary, jobbill (worker, api, migrate, job, account, dlq, audit), into a
# small runtime image; docker-compose.yml runs it as the migrate, worker and api services. The
# tooling (cmd/jobbill-dev: the dev run, the benchmarks, the chaos driver) stays out of it.

FROM golang:1.26.8-bookworm AS build
WORKDIR /src
# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# CGO off: a static binary that needs no libc of the runtime image. -s -w drops debug symbols.
RUN --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/jobbill ./cmd/jobbill

# Debian slim rather than distroless: the api service's healthcheck needs a shell (bash's /dev/tcp).
FROM debian:12.8-slim
# CA roots for runner.kind=http against an https GPU service; slim images have none.
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/jobbill /usr/local/bin/jobbill
# Not root: the process needs no privilege, so a compromise gets none.
RUN useradd --system --uid 10001 --no-create-home jobbill
USER 10001:10001
ENTRYPOINT ["jobbill"]
CMD ["worker"]
