# Builds the jobbill binary into a small runtime image.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/jobbill ./cmd/jobbill

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 jobbill
COPY --from=build /out/jobbill /usr/local/bin/jobbill
USER jobbill
ENTRYPOINT ["jobbill"]
