# wizard-gateway: HTTP and WebSocket into a wizard mesh, as a static
# binary in an empty image (no shell, no libc), run as a non-root user.
# Build it from the repository's root (docs/kubernetes.md):
#
#	docker build -f deploy/images/wizard-gateway.Dockerfile -t wizard-gateway .
#
# BUILDER=prebuilt takes the binary, built outside with the same command
# (GOOS=linux), from bin/wizard-gateway of the context, and the CA bundle from
# bin/ca-certificates.crt: for a machine that cannot pull the Go image
# (deploy/images_test.go builds it so with buildah).
ARG BUILDER=source

FROM golang:1.26 AS source
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags='-s -w' -o /out/wizard-gateway ./cmd/wizard-gateway
RUN cp /etc/ssl/certs/ca-certificates.crt /out/

FROM scratch AS prebuilt
COPY bin/wizard-gateway bin/ca-certificates.crt /out/

FROM ${BUILDER} AS build

FROM scratch
COPY --from=build /out/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/wizard-gateway /wizard-gateway
USER 65532:65532
EXPOSE 8080/tcp 7000/tcp 7946/tcp 7946/udp
ENTRYPOINT ["/wizard-gateway"]
